"""How long five read-only checks take on N nodes at once: runbook against Ansible and parallel-ssh.

Run from the repository root:
    .venv/bin/python bench/fanout/run.py [--hosts 64] [--repeat 3] [--only runbook] [--json] [--keep]
                                         [--gateways K]

It starts a fake cluster of N OpenSSH hosts on this machine (scenarios/clusters/ssh.py: one sshd per
host, each in its own PID/mount/UTS namespaces, on 127.0.0.2..., then 127.0.1.1... past 253
hosts), writes a small log, runs runbook once on every host untimed (it copies the probe to
each), then times the same five reads (system, processes, the end of the log, the NCCL
environment, the log directory) three ways against all N hosts, interleaved, `--repeat` times
each:

* `runbook run fanout-5` (bench/fanout/runbooks/fanout-5.yaml), on N hosts and on one;
* `ansible-playbook` with five `shell` tasks, `-f N`, from a venv of its own
  (bench/fanout/.venv-ansible, made with `python3 -m venv` + `pip install ansible-core` if absent);
* `parallel-ssh -p N`, five invocations in a row (skipped when `parallel-ssh` is not installed).

Besides wall-clock time it reports CPU seconds: the tool's own (with the workers and ssh
clients it waited for), that per host in ms (the client's cost of one more node), and the whole
machine's, which on one machine includes the fake hosts' sshd and the commands run on them.
`--gateways K` (the gateway mode) starts K more hosts as gateways in front of the N, each
with the cluster's ssh config as its own, and also times runbook on the same N through 1 and
through K gateways (`--gateways`), against the flat run: wall time, and the client's CPU, whose
difference between the two gateway runs is what one more gateway costs the client (the
gateways' relays and ssh clients count in the machine's CPU, not the tool's); it times runbook
only. `--only runbook` (or ansible, pssh; repeatable) times only those; `--json` prints the results
as one JSON document on stdout (the progress goes to stderr).

Every run is verified (runbook: exit 0 and every node concluded; Ansible: the recap shows
failed=0 unreachable=0 on every host; parallel-ssh: exit 0 and N successes per call). It prints
the medians and the ratios against their targets, exits 0 when a target is missed (it reports)
and 1 when a run failed verification or a tool could not be set up.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from runbook.transports.ssh import raise_fd_limit  # noqa: E402
from scenarios.clusters.ssh import (  # noqa: E402  (needs the repository root on sys.path)
    Cluster,
    ClusterError,
    find_python_dir,
    requirements_missing,
)

RUNBOOKS = HERE / "runbooks"
RUNBOOK_ID = "fanout-5"
CONCLUSION = "all-read"
ANSIBLE_VENV = HERE / ".venv-ansible"
RUN_TIMEOUT_S = 300.0  # one run of one method (all of its subprocesses together)
INSTALL_TIMEOUT_S = 600.0
PSSH_HOST_TIMEOUT_S = 120  # parallel-ssh's own per-host limit (its default is 60)
TARGET_SCALING = 1.5  # runbook(N) / runbook(1)
TARGET_VS_ANSIBLE = 0.33  # runbook(N) / ansible(N)
TARGET_CPU_PER_HOST_MS = 10.0  # runbook(N)'s tool CPU / N
MAX_HOSTS = 1000
METHODS = ("runbook", "ansible", "pssh")
LOG_LINES = 200


def operations(log: Path) -> list[tuple[str, str]]:
    """The five reads as shell commands: what fanout-5's five checks read, for Ansible and pssh.

    `|| true` after the ps pipeline: grep exits 1 when no line matches (there may be no Python
    process on a node), which is not a failure of the read.
    """
    q, d = shlex.quote(str(log)), shlex.quote(str(log.parent))
    return [
        ("system", "uname -a; cat /proc/loadavg; df -h /"),
        ("process", "ps -eo pid,pcpu,stat,etimes,args | grep -i python || true"),
        ("log", f"tail -n 20 {q}; stat -c %Y {q}"),
        ("env", "env | grep -E '^(NCCL_|PATH=)'"),
        ("file", f"ls -l {d}"),
    ]


class RunFailed(Exception):
    """A run that did not do what it should (non-zero exit, a host missing or failed, a timeout)."""


@dataclass
class Sample:
    """One run: wall-clock seconds; CPU seconds of the tool and the processes it waited for (its
    workers, its ssh clients); CPU seconds of the whole machine (every core, so the fake hosts'
    sshd and the commands run on them as well)."""

    wall: float
    tool_cpu: float
    all_cpu: float

    def __add__(self, other: Sample) -> Sample:
        return Sample(self.wall + other.wall, self.tool_cpu + other.tool_cpu, self.all_cpu + other.all_cpu)


@dataclass
class Method:
    name: str
    hosts: int
    run: Callable[[], Sample] | None  # raises RunFailed; None: not timed (--only, or no set-up)
    skipped: str | None = None
    samples: list[Sample] = field(default_factory=list)
    error: str | None = None
    key: str = ""  # runbook, ansible or pssh (--only)

    def cpu_per_host_ms(self) -> float | None:
        """The tool's CPU (its ssh clients included) per host, in ms."""
        tool = self.median("tool_cpu")
        return None if tool is None else tool / self.hosts * 1000

    def median(self, what: str = "wall") -> float | None:
        if not self.samples or self.error:
            return None
        values: list[float] = [getattr(s, what) for s in self.samples]
        return statistics.median(values)


# ----------------------------------------------------------------------------- subprocesses


def machine_busy_s() -> float:
    """CPU seconds this machine's cores have spent busy since boot (all processes)."""
    with open("/proc/stat") as fh:
        ticks = [int(x) for x in fh.readline().split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = ticks
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def bounded(argv: list[str], *, timeout: float, env: dict[str, str] | None = None,
            cwd: Path | None = None) -> tuple[int, str, Sample]:
    """Run argv in its own process group; (exit code, stdout+stderr, what it took).

    Past `timeout` the whole group (the tool and the workers it forked) is killed and
    RunFailed raised.
    """
    cpu0, busy0 = children_cpu_s(), machine_busy_s()
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env=env, cwd=cwd, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=max(1.0, timeout))
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise RunFailed(f"no result after {timeout:.0f} s (killed): {Path(argv[0]).name} "
                        f"... {tail(out)}") from None
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    wall = time.perf_counter() - start
    return proc.returncode, out or "", Sample(wall, children_cpu_s() - cpu0, machine_busy_s() - busy0)


def tail(text: str | None, n: int = 600) -> str:
    text = (text or "").strip()
    return ("..." + text[-n:]) if len(text) > n else text


# ----------------------------------------------------------------------------- the three methods


def runbook_method(runbook: Path, cluster: Cluster, hosts: int, log: Path, persist: int = 0,
                   targets: list[str] | None = None, gateways: list[str] | None = None,
                   ) -> Callable[[], Sample]:
    """`runbook run fanout-5` on `hosts` nodes (the first of `targets`, default every host),
    through `gateways` when given. persist 0 (this file's runs): no connection is kept for the
    next run, as Ansible's fresh control directory per run; reuse.py measures the reused ones,
    with the CPU of their masters, which no rusage counts."""
    names = (targets or cluster.names())[:hosts]
    argv = [str(runbook), "run", RUNBOOK_ID, "--nodes", ",".join(names), "--forks", str(hosts),
            "--set", f"log={log}", "--set", f"logdir={log.parent}", "--format", "json",
            "--ssh-persist", str(persist), *(["--gateways", ",".join(gateways)] if gateways else [])]
    env = {**cluster.env(), "RUNBOOK_PATH": str(RUNBOOKS)}

    def run() -> Sample:
        code, out, sample = bounded(argv, timeout=RUN_TIMEOUT_S, env=env)
        try:
            report = json.loads(out)
        except ValueError:
            raise RunFailed(f"runbook exited {code} and printed no JSON report: {tail(out)}") from None
        got = {n.get("node"): n for n in report.get("nodes", [])}
        bad = [f"{name}: {node.get('status', 'missing')} ({node.get('reason') or ''})"
               for name in names for node in [got.get(name) or {}]
               if node.get("status") != "concluded" or (node.get("conclusion") or {}).get("id") != CONCLUSION]
        if code != 0 or bad or len(got) != len(names):
            raise RunFailed(f"runbook exited {code}; {len(bad)} of {len(names)} nodes did not conclude "
                            f"{CONCLUSION}: " + "; ".join(bad[:5]))
        return sample

    return run


RECAP = re.compile(r"^(\S+)\s*:\s*ok=(\d+)\s+changed=\d+\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def give_gateways_ssh_config(cluster: Cluster, gateways: list[str]) -> None:
    """A gateway reaches its nodes with its own ssh and ~/.ssh: the cluster's client config."""
    for name in gateways:
        ssh_dir = cluster.host(name).home / ".ssh"
        ssh_dir.mkdir(mode=0o700, exist_ok=True)
        shutil.copy(cluster.ssh_config, ssh_dir / "config")


def gateway_costs(methods: list[Method], k: int) -> dict[str, float | None]:
    """The client's CPU per gateway: what one more gateway costs, from the runs through 1 and
    through K gateways on the same N nodes (the nodes' share is the same in both)."""
    if len(methods) < 6 or k < 2:
        return {"per_gateway_ms": None}
    one, many = methods[4].median("tool_cpu"), methods[5].median("tool_cpu")
    if one is None or many is None:
        return {"per_gateway_ms": None}
    return {"per_gateway_ms": max(0.0, (many - one) / (k - 1)) * 1000}


def ansible_setup(work: Path, cluster: Cluster, python: str, log: Path) -> tuple[list[str], Path]:
    """Write the INI inventory and the playbook; return the argv prefix and the workdir."""
    adir = work / "ansible"
    adir.mkdir(parents=True, exist_ok=True)
    lines = ["[nodes]"]
    lines += [f"{h.name} ansible_host={h.address} ansible_port={h.port}" for h in cluster.hosts]
    lines += ["", "[nodes:vars]", "ansible_user=root",
              f"ansible_ssh_private_key_file={cluster.identity}",
              f"ansible_ssh_common_args='-F {cluster.ssh_config}'",
              f"ansible_python_interpreter={python}", ""]
    (adir / "inventory.ini").write_text("\n".join(lines))
    tasks = [{"name": name, "ansible.builtin.shell": cmd} for name, cmd in operations(log)]
    play = [{"name": "fanout-5", "hosts": "nodes", "gather_facts": False, "tasks": tasks}]
    (adir / "playbook.yml").write_text(json.dumps(play, indent=2) + "\n")  # JSON is YAML
    return [str(ANSIBLE_VENV / "bin" / "ansible-playbook"), "-i", str(adir / "inventory.ini"),
            str(adir / "playbook.yml")], adir


def ansible_method(work: Path, cluster: Cluster, python: str, log: Path, hosts: int,
                   ) -> Callable[[], Sample]:
    argv, adir = ansible_setup(work, cluster, python, log)
    argv += ["-f", str(hosts)]
    runs = iter(range(1, 1_000_000))

    def run() -> Sample:
        # A fresh ControlPath directory per run: each run opens its own connections (one per
        # host, multiplexed for the five tasks, as Ansible does by default) and none reuses the
        # previous run's; those are closed after the run, outside the timing.
        cp_dir = adir / f"cp{next(runs)}"
        cp_dir.mkdir()
        env = {**cluster.env(), **ansible_env(adir),
               "ANSIBLE_SSH_CONTROL_PATH_DIR": str(cp_dir), "ANSIBLE_HOST_KEY_CHECKING": "True",
               "ANSIBLE_PIPELINING": "True", "ANSIBLE_NOCOLOR": "1", "ANSIBLE_RETRY_FILES_ENABLED": "0",
               "ANSIBLE_DEPRECATION_WARNINGS": "False", "ANSIBLE_STDOUT_CALLBACK": "default"}
        try:
            code, out, sample = bounded(argv, timeout=RUN_TIMEOUT_S, env=env, cwd=adir)
        finally:
            close_control_masters(cp_dir, cluster)
        recap = {m[1]: (int(m[2]), int(m[3]), int(m[4])) for m in RECAP.finditer(out)}
        names = cluster.names()[:hosts]
        bad = [n + (": missing" if n not in recap else ": ok={} unreachable={} failed={}".format(*recap[n]))
               for n in names if n not in recap or recap[n] != (5, 0, 0)]
        if code != 0 or bad:
            raise RunFailed(f"ansible-playbook exited {code}; {len(bad)} of {len(names)} hosts not "
                            f"ok=5 failed=0 unreachable=0 ({', '.join(bad[:5])}): {tail(out)}")
        return sample

    return run


def close_control_masters(cp_dir: Path, cluster: Cluster) -> None:
    """`ssh -O exit` every ControlPersist master Ansible left in cp_dir (they would idle 60 s)."""
    sockets = [p for p in cp_dir.iterdir() if p.is_socket()] if cp_dir.is_dir() else []

    def close(sock: Path) -> None:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(["ssh", "-F", str(cluster.ssh_config), "-o", f"ControlPath={sock}",
                            "-O", "exit", "unused"], capture_output=True, timeout=10,
                           stdin=subprocess.DEVNULL)

    if sockets:
        with ThreadPoolExecutor(max_workers=16) as pool:
            list(pool.map(close, sockets))


def pssh_method(pssh: str, work: Path, cluster: Cluster, log: Path, hosts: int) -> Callable[[], Sample]:
    hostsfile = work / "pssh-hosts"
    hostsfile.write_text("".join(f"{name}\n" for name in cluster.names()[:hosts]))
    base = [pssh, "-p", str(hosts), "-t", str(PSSH_HOST_TIMEOUT_S), "-h", str(hostsfile),
            "-x", f"-F {cluster.ssh_config} -o BatchMode=yes", "-i"]
    env = cluster.env()

    def run() -> Sample:
        total = Sample(0.0, 0.0, 0.0)
        deadline = time.monotonic() + RUN_TIMEOUT_S
        for name, cmd in operations(log):
            code, out, sample = bounded([*base, cmd], timeout=deadline - time.monotonic(), env=env)
            total += sample
            ok = len(re.findall(r"^\[\d+\] \S+ \[SUCCESS\]", out, re.M))
            if code != 0 or ok != hosts:
                raise RunFailed(f"parallel-ssh ({name}) exited {code} with {ok} of {hosts} "
                                f"successes: {tail(out)}")
        return total

    return run


# ----------------------------------------------------------------------------- setup


def ansible_env(adir: Path) -> dict[str, str]:
    """Ansible's own files (local temp, collections, config) under adir, none in ~/.ansible."""
    return {"ANSIBLE_CONFIG": str(adir / "ansible.cfg"), "ANSIBLE_HOME": str(adir / "home"),
            "ANSIBLE_LOCAL_TEMP": str(adir / "tmp")}


def ensure_ansible(python: str, adir: Path) -> str:
    """ansible-playbook's version, installing ansible-core into ANSIBLE_VENV when needed."""
    playbook = ANSIBLE_VENV / "bin" / "ansible-playbook"
    adir.mkdir(parents=True, exist_ok=True)
    (adir / "ansible.cfg").write_text("[defaults]\n")  # so no ansible.cfg elsewhere is read
    env = {**os.environ, **ansible_env(adir)}

    def version() -> str | None:
        if not playbook.exists():
            return None
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            res = subprocess.run([str(playbook), "--version"], capture_output=True, text=True,
                                 timeout=60, stdin=subprocess.DEVNULL, env=env, cwd=adir)
            if res.returncode == 0:
                return res.stdout.splitlines()[0].strip()
        return None

    if found := version():
        return found
    # Progress, never the report: with --json, stdout must hold the JSON document alone.
    print(f"# installing ansible-core into {ANSIBLE_VENV.relative_to(ROOT)} (once) ...", file=sys.stderr,
          flush=True)
    steps = [[python, "-m", "venv", str(ANSIBLE_VENV)],
             [str(ANSIBLE_VENV / "bin" / "pip"), "install", "--quiet", "ansible-core"]]
    for argv in steps:
        if argv[1:3] == ["-m", "venv"] and (ANSIBLE_VENV / "bin" / "pip").exists():
            continue
        code, out, _ = bounded(argv, timeout=INSTALL_TIMEOUT_S)
        if code != 0:
            raise RunFailed(f"`{shlex.join(argv[:4])} ...` failed ({code}): {tail(out)}")
    if found := version():
        return found
    raise RunFailed("ansible-core was installed but ansible-playbook --version fails")


def write_log(work: Path) -> Path:
    logdir = work / "logs"
    logdir.mkdir()
    log = logdir / "train.log"
    log.write_text("".join(f"step {i} loss {2.0 / (i + 1):.4f} lr 3e-4\n" for i in range(LOG_LINES)))
    (logdir / "rank1.log").write_text("step 0 loss 2.0\n")
    return log


def tool_version(argv: list[str]) -> str:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        res = subprocess.run(argv, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        text = (res.stdout or res.stderr).strip()
        if text:
            return text.splitlines()[0]
    return "?"


# ----------------------------------------------------------------------------- report


def ratio_line(label: str, num: Method, den: Method, target: float | None) -> tuple[str, bool | None]:
    a, b = num.median(), den.median()
    if a is None or b is None:
        m = num if a is None else den
        why = "skipped" if m.skipped else ("not run (--only)" if m.run is None and not m.error
                                           else "failed")
        return f"{label:<34}    n/a   ({m.name}, {m.hosts} hosts: {why})", None
    value = a / b
    if target is None:
        return f"{label:<34} {value:6.2f}   (no target)", None
    met = value <= target
    return f"{label:<34} {value:6.2f}   target <= {target:g}: {'met' if met else 'MISSED'}", met


def cpu_line(m: Method) -> tuple[str, bool | None]:
    per_host = m.cpu_per_host_ms()
    label = f"runbook({m.hosts}) client CPU per host"
    if per_host is None:
        return f"{label:<34}    n/a", None
    met = per_host <= TARGET_CPU_PER_HOST_MS
    return (f"{label:<34} {per_host:6.1f}   ms, target <= {TARGET_CPU_PER_HOST_MS:g}: "
            f"{'met' if met else 'MISSED'}"), met


def comparisons(methods: list[Method], n: int) -> list[tuple[str, Method, Method, float | None]]:
    rb1, rbn, ans, pss = methods[:4]
    rows = [(f"runbook({n}) / runbook(1)", rbn, rb1, TARGET_SCALING),
            (f"runbook({n}) / ansible({n})", rbn, ans, TARGET_VS_ANSIBLE),
            (f"runbook({n}) / pssh({n})", rbn, pss, None)]
    rows += [(f"runbook({n}) {m.name.split(' ', 3)[-1]} / flat", m, rbn, None) for m in methods[4:]]
    return rows


def report(methods: list[Method], n: int, out: TextIO = sys.stdout) -> None:
    print(file=out)
    print(f"{'method':<34}{'hosts':>6}{'median s':>10}{'tool CPU s':>12}{'ms/host':>9}{'all CPU s':>11}"
          "   runs (s)", file=out)
    for m in methods:
        if m.skipped or (m.run is None and not m.error):
            why = f"skipped: {m.skipped}" if m.skipped else "not run (--only)"
            print(f"{m.name:<34}{m.hosts:>6}{'-':>10}{'-':>12}{'-':>9}{'-':>11}   {why}", file=out)
            continue
        runs = " ".join(f"{s.wall:.2f}" for s in m.samples)
        wall, tool, every, per_host = (m.median("wall"), m.median("tool_cpu"), m.median("all_cpu"),
                                       m.cpu_per_host_ms())
        if wall is None or tool is None or every is None or per_host is None:
            print(f"{m.name:<34}{m.hosts:>6}{'FAILED':>10}{'-':>12}{'-':>9}{'-':>11}   {runs}".rstrip(),
                  file=out)
            continue
        print(f"{m.name:<34}{m.hosts:>6}{wall:>10.2f}{tool:>12.2f}{per_host:>9.1f}{every:>11.2f}   {runs}",
              file=out)
    print(file=out)
    for label, num, den, target in comparisons(methods, n):
        print(ratio_line(label, num, den, target)[0], file=out)
    print(cpu_line(methods[1])[0], file=out)
    if len(methods) > 4:
        costs = gateway_costs(methods, int(methods[-1].name.rsplit("via ", 1)[-1].split()[0]))
        if costs["per_gateway_ms"] is not None:
            print(f"{'client CPU per gateway':<34} {costs['per_gateway_ms']:6.1f}   ms (bench/scale.py "
                  "--gateway-costs projects 100,000 nodes with it)", file=out)
    for m in methods:
        if m.error:
            print(f"\nFAILED {m.name} ({m.hosts} hosts): {m.error}", file=out)


def report_json(methods: list[Method], n: int, header: dict[str, Any]) -> dict[str, Any]:
    """The results as plain data: per method its medians and runs, then the ratios and targets."""
    def method(m: Method) -> dict[str, Any]:
        return {"name": m.name, "tool": m.key, "hosts": m.hosts, "skipped": m.skipped, "error": m.error,
                "ran": bool(m.samples), "median_wall_s": m.median("wall"),
                "median_tool_cpu_s": m.median("tool_cpu"), "median_all_cpu_s": m.median("all_cpu"),
                "tool_cpu_ms_per_host": m.cpu_per_host_ms(),
                "runs": [{"wall_s": s.wall, "tool_cpu_s": s.tool_cpu, "all_cpu_s": s.all_cpu}
                         for s in m.samples]}

    ratios = []
    for label, num, den, target in comparisons(methods, n):
        a, b = num.median(), den.median()
        value = a / b if a is not None and b is not None else None
        ratios.append({"ratio": label, "value": value, "target": target,
                       "met": None if value is None or target is None else value <= target})
    per_host = methods[1].cpu_per_host_ms()
    if len(methods) > 4:
        header = {**header, "gateway_costs": gateway_costs(methods, header["gateways"])}
    return {**header, "hosts": n, "methods": [method(m) for m in methods], "ratios": ratios,
            "client_cpu_per_host": {"value_ms": per_host, "target_ms": TARGET_CPU_PER_HOST_MS,
                                    "met": None if per_host is None else per_host <= TARGET_CPU_PER_HOST_MS}}


# ----------------------------------------------------------------------------- main


def warm_up(m: Method, progress: TextIO) -> None:
    """One untimed runbook run on every host first: it copies the probe bundle to each node and
    fills the runbook load cache (under the cluster's HOME), as any earlier run would have; the
    timed runs then measure a run as users see it every time but the first."""
    if m.run is None:
        return
    try:
        sample = m.run()
    except RunFailed as exc:
        m.error = f"warm-up run: {exc}"
        print(f"  warm-up: {m.name:<34} {m.hosts:>3} hosts  FAILED", file=progress, flush=True)
        return
    print(f"  warm-up: {m.name:<34} {m.hosts:>3} hosts  {sample.wall:7.2f} s  (untimed: copies the "
          "probe bundle to every node)", file=progress, flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="bench/fanout/run.py", description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--hosts", type=int, default=64,
                    help=f"fake hosts to start (default 64, max {MAX_HOSTS})")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each method; the median is "
                    "reported (default 3)")
    ap.add_argument("--only", action="append", choices=METHODS, metavar="TOOL",
                    help="time only this tool: runbook, ansible or pssh (repeatable; default all)")
    ap.add_argument("--gateways", type=int, default=0, metavar="K",
                    help="also time runbook through 1 and through K gateways (--gateways): K more "
                    "hosts are started in front of the N; the flat runs use the same N")
    ap.add_argument("--json", action="store_true", help="print the results as JSON on stdout "
                    "(progress on stderr)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory (cluster "
                    "files, inventory, playbook, log) and print where it is")
    args = ap.parse_args(argv)
    if not 1 <= args.hosts + args.gateways <= MAX_HOSTS or args.repeat < 1 or args.gateways < 0:
        ap.error(f"--hosts plus --gateways must be 1..{MAX_HOSTS}, --repeat >= 1")
    args.only = set(args.only or METHODS)
    if args.gateways:  # the gateway mode compares runbook through gateways with runbook flat
        args.only = {"runbook"}
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    progress = sys.stderr if args.json else sys.stdout
    if missing := requirements_missing():
        print("cannot start the fake cluster: " + "; ".join(missing), file=sys.stderr)
        return 1
    runbook = Path(sys.executable).parent / "runbook"
    if not runbook.exists():
        print(f"{runbook} is missing: run this with the project's venv python", file=sys.stderr)
        return 1
    raise_fd_limit()
    n = args.hosts
    python_dir = find_python_dir()
    python = f"{python_dir}/python3"

    pssh = shutil.which("parallel-ssh")
    pssh_skip = None if pssh else ("`parallel-ssh` is not installed (Debian/Ubuntu: "
                                   "`apt-get install pssh`)")
    work = Path(tempfile.mkdtemp(prefix="runbook-fanout-"))
    cluster: Cluster | None = None
    methods: list[Method] = []
    try:
        ansible_version, ansible_error = "ansible not timed (--only)", None
        if "ansible" in args.only:
            try:
                ansible_version = ensure_ansible(python, work / "ansible")
            except RunFailed as exc:
                ansible_version, ansible_error = "ansible-core not installed", str(exc)
        pssh_version = tool_version([pssh, "--version"]) if pssh else "absent"
        header = {"cpus": os.cpu_count(), "python": platform.python_version(), "ansible": ansible_version,
                  "parallel_ssh": pssh_version, "repeat": args.repeat, "gateways": args.gateways}
        print(f"# {os.cpu_count()} CPUs, Python {platform.python_version()}; {ansible_version}; "
              f"parallel-ssh {pssh_version}", file=progress, flush=True)
        t0 = time.monotonic()
        try:
            cluster = Cluster.start(n + args.gateways, work / "cluster", port=None, python_dir=python_dir)
        except ClusterError as exc:
            print(f"cannot start the fake cluster: {exc}", file=sys.stderr)
            return 1
        header["cluster_up_s"] = round(time.monotonic() - t0, 2)
        print(f"# {n} fake hosts up in {time.monotonic() - t0:.1f} s; {args.repeat} run(s) of each "
              f"method, interleaved; five read-only operations per host", file=progress, flush=True)
        log = write_log(work)
        wanted = args.only
        gateways, targets = cluster.names()[:args.gateways], cluster.names()[args.gateways:]
        give_gateways_ssh_config(cluster, gateways)
        methods = [
            Method(f"runbook run {RUNBOOK_ID}", 1,
                   runbook_method(runbook, cluster, 1, log, targets=targets) if "runbook" in wanted
                   else None, key="runbook"),
            Method(f"runbook run {RUNBOOK_ID}", n,
                   runbook_method(runbook, cluster, n, log, targets=targets) if "runbook" in wanted
                   else None, key="runbook"),
            Method("ansible-playbook (5 shell tasks)", n,
                   None if ansible_error or "ansible" not in wanted
                   else ansible_method(work, cluster, python, log, n), key="ansible"),
            Method("parallel-ssh (5 calls)", n,
                   pssh_method(pssh, work, cluster, log, n) if pssh and "pssh" in wanted else None,
                   skipped=pssh_skip if "pssh" in wanted else None, key="pssh"),
        ]
        for k in sorted({1, args.gateways}) if args.gateways else ():
            methods.append(Method(f"runbook run {RUNBOOK_ID} via {k} gateway{'s' if k > 1 else ''}", n,
                                  runbook_method(runbook, cluster, n, log, targets=targets,
                                                 gateways=gateways[:k]) if "runbook" in wanted else None,
                                  key="runbook"))
        if ansible_error:
            methods[2].error = f"cannot set up Ansible: {ansible_error}"
        for m in methods[1:2] + methods[4:]:
            warm_up(m, progress)
        for i in range(args.repeat):
            for m in methods:
                if m.run is None or m.error or m.skipped:
                    continue
                try:
                    sample = m.run()
                except RunFailed as exc:
                    m.error = str(exc)
                    print(f"  run {i + 1}: {m.name:<34} {m.hosts:>3} hosts  FAILED", file=progress,
                          flush=True)
                    continue
                m.samples.append(sample)
                print(f"  run {i + 1}: {m.name:<34} {m.hosts:>3} hosts  {sample.wall:7.2f} s  "
                      f"{sample.tool_cpu / m.hosts * 1000:7.1f} ms CPU/host", file=progress, flush=True)
        if args.json:
            print(json.dumps(report_json(methods, n, header), indent=2))
        else:
            report(methods, n)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    finally:
        if cluster is not None:
            cluster.stop()
        if args.keep:
            print(f"\n# kept {work}", file=progress)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 1 if any(m.error for m in methods) else 0


if __name__ == "__main__":
    sys.exit(main())
