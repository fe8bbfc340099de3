"""Client CPU per host of a first run and of a repeat: runbook's reused SSH connections against
plain OpenSSH, with and without ControlPersist, measured in the same run.

Run from the repository root:
    .venv/bin/python bench/fanout/reuse.py [--hosts 64] [--repeat 3] [--json]

It starts a fake cluster of N OpenSSH hosts (as bench/fanout/run.py does), warms runbook up
once (the probe bundle is copied to every host), then, `--repeat` rounds, each in this order:

* runbook first: `runbook run fanout-5` on N hosts after `runbook ssh-masters --stop`
  (untimed), so every node gets a new connection (a control master per node);
* runbook repeat: the same run again, within the window: each node's session opens on the
  master the first run left;
* the same two on node01 alone, for the marginal cost of one more host;
* transport alone first, then repeat: the SSH transport in this process, without runbook's
  start and walk (a thread per node asks the five checks, then close()), the masters stopped
  before the first: the client cost of the connections themselves;
* ssh: one `ssh HOST 'the five reads'` per host, all at once (xargs -P N): a new connection
  each, the cheapest way to do it with plain OpenSSH;
* ssh ControlPersist first, then repeat: the same with `-o ControlMaster=auto -o
  ControlPath=DIR/%C -o ControlPersist=60`, as a user's ~/.ssh/config would set it (the
  masters stopped, untimed, before the first).

Every ssh is given runbook's key exchange preference (P-256, then curve25519), so the rows
differ in how connections are made and reused, not in the key exchange. The CPU counted is the
client's: the process run and the processes it waited for (RUSAGE_CHILDREN: runbook, its
`ssh -N`, the ssh clients), plus what the control masters (runbook's and ssh's, which live
on in the background and are nobody's child) spent during the run, read from /proc.
Per host: `total/N`, and for runbook the marginal `(CPU(N) - CPU(1)) / (N - 1)`, which leaves
out runbook's own start (Python and its imports, about 0.25 s once per run). For the
transport's rows, where that CPU went: the benchmark's process (the transport's Python), the
`ssh -N` processes until each master goes to the background (key exchange, authentication),
and the masters. Every run is verified (runbook: exit 0, every node concluded; ssh: exit 0).
Exit 1 when a run failed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import shlex
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run as fanout  # noqa: E402  (bench/fanout/run.py: the cluster, the runs, the CPU counters)

from runbook.transports._openssh import KEX_FIRST  # noqa: E402  (run.py put the engine on the path)

TARGET_FIRST_MS = 10.0
TARGET_REPEAT_MS = 3.0
PERSIST_S = 60


def master_pids(folder: Path) -> list[int]:
    """Our ssh processes that are control masters on a socket in `folder`."""
    found = []
    marker = f"ControlPath={folder}/".encode()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{entry.name}/cmdline").read_bytes().split(b"\0")
            if argv and os.path.basename(argv[0]) == b"ssh" and any(a.startswith(marker) for a in argv):
                found.append(int(entry.name))
    return found


def masters_cpu(folder: Path) -> dict[int, float]:
    """CPU seconds so far of each master on a socket in `folder`: /proc/PID/schedstat's time on
    a CPU, in ns (utime + stime in /proc/PID/stat count whole 10 ms ticks, and a master's
    share of a run is well under one)."""
    seconds = {}
    for pid in master_pids(folder):
        with contextlib.suppress(OSError, ValueError, IndexError):
            seconds[pid] = int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9
    return seconds


def with_masters(folder: Path, run: Callable[[], fanout.Sample]) -> fanout.Sample:
    """A run's sample with the CPU its masters spent during it added to the tool's."""
    before = masters_cpu(folder)
    sample = run()
    after = masters_cpu(folder)
    spent = sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())
    return fanout.Sample(sample.wall, sample.tool_cpu + spent, sample.all_cpu)


def stop_masters(folder: Path) -> None:
    """End every master on a socket in `folder` and remove the sockets (untimed)."""
    pids = master_pids(folder)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and master_pids(folder):
        time.sleep(0.05)
    if folder.is_dir():
        for sock in folder.iterdir():
            with contextlib.suppress(OSError):
                sock.unlink()


def ssh_run(cluster: fanout.Cluster, hosts: int, command: str, options: list[str],
            ) -> Callable[[], fanout.Sample]:
    """One plain `ssh` per host, all at once; fails unless every one exits 0."""
    names = "\n".join(cluster.names()[:hosts]) + "\n"
    ssh = shlex.join(["ssh", "-F", str(cluster.ssh_config), "-T", "-o", "BatchMode=yes",
                      "-o", f"KexAlgorithms=^{KEX_FIRST}", *options])
    script = (f"printf %s {shlex.quote(names)} | xargs -P {hosts} -I_HOST_ {ssh} _HOST_ "
              f"{shlex.quote(command)} > /dev/null")

    def run() -> fanout.Sample:
        code, out, sample = fanout.bounded(["sh", "-c", script], timeout=fanout.RUN_TIMEOUT_S,
                                           env=cluster.env())
        if code != 0:
            raise fanout.RunFailed(f"ssh exited {code} on some host: {fanout.tail(out)}")
        return sample

    return run


Split = tuple[float, float, float]  # CPU seconds of a transport run: this process, its ssh, the masters


def transport_run(cluster: fanout.Cluster, hosts: int, log: Path, persist: int, masters_dir: Path,
                  ) -> Callable[[list[Split] | None], fanout.Sample]:
    """The SSH transport alone, in this process: a run's five checks on every node, one thread
    per node, then close(), as `runbook run` does, without its start and its walk. Its sample
    counts the masters' CPU during the run; `splits` gets where the CPU went."""
    from runbook.transports import Node
    from runbook.transports.ssh import SshTransport

    requests = [{"check": "system", "with": {}}] + [
        {"check": "command", "with": {"run": cmd}} for _, cmd in fanout.operations(log)[1:]]

    def run(splits: list[Split] | None = None) -> fanout.Sample:
        os.environ["HOME"] = str(cluster.home)  # the cluster's ~/.ssh, as cluster.env() gives runbook
        statuses: list[str] = []

        def node(name: str) -> None:
            statuses.extend(transport.run_check(Node(name, "ssh"), r, 30).status for r in requests)

        masters0 = masters_cpu(masters_dir)
        (self0, ssh0), busy0, start = own_cpu_s(), fanout.machine_busy_s(), time.perf_counter()
        transport = SshTransport(connect_timeout=30, persist=persist)
        threads = [threading.Thread(target=node, args=(name,)) for name in cluster.names()[:hosts]]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        transport.close()
        (self1, ssh1), wall = own_cpu_s(), time.perf_counter() - start
        busy = fanout.machine_busy_s() - busy0
        masters = sum(cpu - masters0.get(pid, 0.0) for pid, cpu in masters_cpu(masters_dir).items())
        if statuses != ["ok"] * (hosts * len(requests)):
            raise fanout.RunFailed(f"transport: {len(statuses)} answers, not all ok: {set(statuses)}")
        if splits is not None:
            splits.append((self1 - self0, ssh1 - ssh0, masters))
        return fanout.Sample(wall, (self1 - self0) + (ssh1 - ssh0) + masters, busy)

    return run


def own_cpu_s() -> tuple[float, float]:
    """CPU seconds of this process, and of the children it waited for (each `ssh -N` until its
    master goes to the background)."""
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, children.ru_utime + children.ru_stime


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench/fanout/reuse.py", description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--hosts", type=int, default=64, help="fake hosts (default 64)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds; medians are reported (default 3)")
    ap.add_argument("--json", action="store_true", help="the results as JSON on stdout")
    args = ap.parse_args(argv)
    if not 2 <= args.hosts <= fanout.MAX_HOSTS or args.repeat < 1:
        ap.error(f"--hosts must be 2..{fanout.MAX_HOSTS} and --repeat >= 1")
    if missing := fanout.requirements_missing():
        print("cannot start the fake cluster: " + "; ".join(missing), file=sys.stderr)
        return 1
    runbook = Path(sys.executable).parent / "runbook"
    progress = sys.stderr if args.json else sys.stdout
    fanout.raise_fd_limit()
    n = args.hosts
    work = Path(tempfile.mkdtemp(prefix="runbook-reuse-"))
    runtime, ssh_masters = work / "rt", work / "cm"  # runbook's masters, and plain ssh's
    runtime.mkdir(mode=0o700)
    ssh_masters.mkdir(mode=0o700)
    rb_masters = runtime / "runbook-ssh"
    cluster = None
    try:
        cluster = fanout.Cluster.start(n, work / "cluster", port=None, python_dir=fanout.find_python_dir())
        log = fanout.write_log(work)
        os.environ["XDG_RUNTIME_DIR"] = str(runtime)  # cluster.env() copies it to every runbook run
        reads = "; ".join(cmd for _, cmd in fanout.operations(log))
        persist = ["-o", "ControlMaster=auto", "-o", f"ControlPath={ssh_masters}/%C",
                   "-o", f"ControlPersist={PERSIST_S}"]
        rb_n = fanout.runbook_method(runbook, cluster, n, log, persist=PERSIST_S)
        rb_1 = fanout.runbook_method(runbook, cluster, 1, log, persist=PERSIST_S)
        plain, cp = ssh_run(cluster, n, reads, []), ssh_run(cluster, n, reads, persist)
        transport_first = transport_run(cluster, n, log, PERSIST_S, rb_masters)
        splits: dict[str, list[Split]] = {"transport alone first": [], "transport alone repeat": []}
        rows: list[tuple[str, int, Callable[[], fanout.Sample], Callable[[], None] | None]] = [
            ("runbook first", n, lambda: with_masters(rb_masters, rb_n), lambda: stop_masters(rb_masters)),
            ("runbook repeat", n, lambda: with_masters(rb_masters, rb_n), None),
            ("runbook first", 1, lambda: with_masters(rb_masters, rb_1), lambda: stop_masters(rb_masters)),
            ("runbook repeat", 1, lambda: with_masters(rb_masters, rb_1), None),
            ("transport alone first", n, lambda: transport_first(splits["transport alone first"]),
             lambda: stop_masters(rb_masters)),
            ("transport alone repeat", n, lambda: transport_first(splits["transport alone repeat"]), None),
            ("ssh (a new connection each)", n, plain, None),
            ("ssh ControlPersist first", n, lambda: with_masters(ssh_masters, cp),
             lambda: stop_masters(ssh_masters)),
            ("ssh ControlPersist repeat", n, lambda: with_masters(ssh_masters, cp), None),
        ]
        rb_n()  # warm-up, untimed: the probe bundle onto every node, runbook's load cache
        transport_first()  # and this process's imports and bundle, untimed
        samples: dict[tuple[str, int], list[fanout.Sample]] = {(name, h): [] for name, h, _, _ in rows}
        for i in range(args.repeat):
            for name, hosts, run, before in rows:
                if before is not None:
                    before()
                sample = run()
                samples[(name, hosts)].append(sample)
                print(f"  round {i + 1}: {name:<30} {hosts:>3} hosts  {sample.wall:6.2f} s  "
                      f"{sample.tool_cpu * 1000 / hosts:7.1f} ms CPU/host", file=progress, flush=True)
        stop_masters(rb_masters)
        stop_masters(ssh_masters)
    except fanout.RunFailed as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return 1
    finally:
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(work, ignore_errors=True)

    def cpu(name: str, hosts: int) -> float:
        return statistics.median(s.tool_cpu for s in samples[(name, hosts)])

    def wall(name: str, hosts: int) -> float:
        return statistics.median(s.wall for s in samples[(name, hosts)])

    results = []
    for name, hosts, _, _ in rows:
        if hosts == 1:
            continue
        marginal = None
        if name.startswith("runbook"):
            marginal = (cpu(name, n) - cpu(name, 1)) / (n - 1) * 1000
        results.append({"method": name, "hosts": hosts, "median_wall_s": wall(name, hosts),
                        "median_client_cpu_s": cpu(name, hosts),
                        "client_cpu_ms_per_host": cpu(name, hosts) / hosts * 1000,
                        "marginal_ms_per_host": marginal})
        if name in splits:  # each part's median on its own, in ms per host
            results[-1]["split_ms_per_host"] = {
                part: statistics.median(split[i] for split in splits[name]) / hosts * 1000
                for i, part in enumerate(("runbook_process", "ssh_until_detached", "masters"))}
    first = next(r for r in results if r["method"] == "runbook first")["marginal_ms_per_host"]
    repeat = next(r for r in results if r["method"] == "runbook repeat")["marginal_ms_per_host"]
    targets = {"first_ms": {"value": first, "target": TARGET_FIRST_MS, "met": first <= TARGET_FIRST_MS},
               "repeat_ms": {"value": repeat, "target": TARGET_REPEAT_MS, "met": repeat <= TARGET_REPEAT_MS}}
    if args.json:
        print(json.dumps({"cpus": os.cpu_count(), "python": platform.python_version(), "hosts": n,
                          "repeat": args.repeat, "results": results, "targets": targets}, indent=2))
        return 0
    print(f"\n{'method':<30}{'hosts':>6}{'median s':>10}{'client CPU s':>14}{'ms/host':>9}{'marginal':>10}")
    for r in results:
        value = r["marginal_ms_per_host"]
        marginal = f"{value:10.1f}" if value is not None else f"{'-':>10}"
        print(f"{r['method']:<30}{r['hosts']:>6}{r['median_wall_s']:>10.2f}{r['median_client_cpu_s']:>14.2f}"
              f"{r['client_cpu_ms_per_host']:>9.1f}{marginal}")
    for r in results:
        if split := r.get("split_ms_per_host"):
            print(f"{r['method']}: runbook's process {split['runbook_process']:.1f}, its `ssh -N` until the "
                  f"master detaches {split['ssh_until_detached']:.1f}, the masters {split['masters']:.1f} "
                  "ms per host (medians)")
    print(f"\nrunbook first run, marginal client CPU per host {first:6.1f} ms, target <= "
          f"{TARGET_FIRST_MS:g}: {'met' if first <= TARGET_FIRST_MS else 'MISSED'}")
    print(f"runbook repeat, marginal client CPU per host    {repeat:6.1f} ms, target <= "
          f"{TARGET_REPEAT_MS:g}: {'met' if repeat <= TARGET_REPEAT_MS else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
