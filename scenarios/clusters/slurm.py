"""A real Slurm cluster on this one machine: munged, slurmctld and N slurmd, started and
stopped by the tests themselves.

Standard library only (no pytest needed to import it). Needs root, Slurm's daemons and
clients (Debian: ``apt-get install slurm-wlm munge``; tested with Slurm 22.05.8) and
util-linux's ``unshare``.

Everything lives under one base directory BASE::

    BASE/slurm.conf          the cluster's only configuration (clients: SLURM_CONF=BASE/slurm.conf)
    BASE/munge/              munge.key (0400), munged.pid, munged.log, munged.seed (dir 0700)
    BASE/run/                munge.socket and, per node, SlurmdSpoolDir run/spool/nodeNN (the
                             step daemons' Unix sockets); a short /tmp/rb-slurm-* directory,
                             linked as BASE/run, when BASE is too long for a socket path
    BASE/state/              StateSaveLocation
    BASE/log/                slurmctld.log, slurmd-nodeNN.log, the daemons' stdout/stderr
    BASE/jobs/               default working directory of sbatch (scripts, slurm-JOBID.out)
    BASE/slurm.json          pids, ports, names: what `down` kills

* munged runs in the foreground (``-F``) as root (``--force``) with its own key and socket;
  ``AuthInfo=socket=...`` in slurm.conf makes every daemon and client use that socket.
* slurmctld listens on 127.0.0.1 (``SlurmctldHost=localhost``) on a free port, in its own PID
  namespace too (so its slurmscriptd child dies, and is reaped, with it).
* node i (0-based) is ``node{i+1:02d}``: ``slurmd -D -N nodeNN`` with its own port (a node's
  ``Port=``), ``NodeAddr=127.0.0.{i+2}``, ``CPUs=2`` and its own spool and log. Debian's build
  accepts several slurmd on one host when each has its own ``-N`` and port. Each slurmd runs
  under ``unshare --pid --fork --mount-proc --uts`` like a host of scenarios/clusters/ssh.py, so on
  a node ``hostname`` prints ``nodeNN`` (as does ``$SLURMD_NODENAME``), ``ps -e`` shows that
  node's slurmd, step daemons and job processes only, and killing the namespace's pid 1 (a
  shell that reaps orphans and waits for slurmd) kills every job process of that node, even
  ones that did setsid or double-forked. The network namespace is shared.
* proctrack/linuxproc, task/none, select/cons_tres with CR_CPU, no accounting (``sacct``
  answers "Slurm accounting storage is disabled": there is no slurmdbd), ReturnToService=2,
  MinJobAge=86400 (finished jobs stay in ``scontrol show job`` and ``squeue -t all``),
  KillWait=2 (scancel kills within about 2 s).

From a shell::

    python3 -m scenarios.clusters.slurm up 2 --dir /tmp/s2       # one line of JSON; up until Ctrl-C
    SLURM_CONF=/tmp/s2/slurm.conf sinfo
    SLURM_CONF=/tmp/s2/slurm.conf sbatch -N2 --ntasks-per-node=1 --wrap 'srun hostname'
    python3 -m scenarios.clusters.slurm down --dir /tmp/s2       # if the `up` process was SIGKILLed

From Python::

    from scenarios.clusters.slurm import SlurmCluster
    with SlurmCluster.start(2, tmp_path) as sl:
        job = sl.sbatch("#!/bin/bash\\nsrun hostname\\n", "--nodes=2", "--ntasks-per-node=1")
        sl.wait_state(job, {"COMPLETED"}, timeout=30)
        print(sl.job(job)["StdOut"], sl.output(job))
        sl.run("srun", "--jobid", str(job), "--overlap", "true")   # any client, SLURM_CONF set

munged, slurmctld and each slurmd are `Daemon`s (daemon.py), slurmctld and the slurmds
namespaced, and the cluster a `DaemonGroup` (group.py): starting, waiting, the state file,
`stop()` and `down` are theirs.

From pytest: ``tests/slurm_fixture.py`` has the fixtures ``slurm`` (2 nodes, module scope) and
``make_slurm`` (a factory).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scenarios.clusters import group
from scenarios.clusters.cli import ClusterCommand
from scenarios.clusters.daemon import KILL_WAIT_S, Daemon, DaemonError, stop_all, wait_ready
from scenarios.clusters.group import DaemonGroup
from scenarios.clusters.net import free_ports, host_name
from scenarios.clusters.procs import cmdline, namespace_pids, tail

SLURMCTLD = "/usr/sbin/slurmctld"
SLURMD = "/usr/sbin/slurmd"
MUNGED = "/usr/sbin/munged"
CLIENTS = ("sinfo", "squeue", "sbatch", "srun", "scontrol", "scancel")
STATE_FILE = "slurm.json"
CLUSTER_NAME = "runbook"
PARTITION = "debug"
POLL_S = 0.1
MUNGE_WAIT_S = 5.0
READY_WAIT_S = 30.0  # slurmctld up and every node idle; usually ~1-2 s
CLIENT_TIMEOUT_S = 30.0
MAX_SOCKET_DIR = 60  # a Unix socket path is at most 107 bytes; step sockets add ~30
# The namespace's pid 1: sets the hostname, then waits for slurmd as a foreground child
# (not exec'd: the shell's wait reaps the orphaned step daemons re-parented to it).
_NODE_SH = 'hostname "$1" || exit 97; "$2" -D -N "$1" -f "$3"; exit $?'
_CTLD_SH = '"$1" -D -c -i -f "$2"; exit $?'
# Client-side variables a surrounding Slurm job (or a user's shell) may set; they would make
# our clients talk about another job or change their defaults.
_INHERITED = re.compile(r"^(SLURM_|SBATCH_|SALLOC_|SRUN_|SQUEUE_|SINFO_|SCONTROL_)")
_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_/:]*)=")


class SlurmError(DaemonError):
    """The Slurm cluster could not be started, or a command or wait failed."""


@dataclass
class Node:
    """One slurmd, in its own PID, mount and UTS namespaces."""

    name: str  # node01, ...
    address: str  # 127.0.0.2, ...
    port: int
    index: int = 0
    daemon: Daemon = field(init=False, repr=False, compare=False)  # set by the cluster

    @property
    def unshare_pid(self) -> int:
        return self.daemon.pid

    @property
    def ns_init_pid(self) -> int:
        """The namespace's pid 1 (a shell), as seen from this machine."""
        return self.daemon.ns_init_pid

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "address": self.address, "port": self.port,
                "unshare_pid": self.unshare_pid, "ns_init_pid": self.ns_init_pid}


# ----------------------------------------------------------------------------- helpers


def requirements_missing() -> list[str]:
    """Why a Slurm cluster cannot be started on this machine (empty list: it can)."""
    why = []
    for daemon, package in ((SLURMCTLD, "slurm-wlm"), (SLURMD, "slurm-wlm"), (MUNGED, "munge")):
        if not os.access(daemon, os.X_OK):
            why.append(f"{daemon} is absent (install {package})")
    why += [f"`{tool}` is not on PATH (install slurm-wlm)" for tool in CLIENTS
            if shutil.which(tool) is None]
    if shutil.which("unshare") is None:
        why.append("`unshare` is not on PATH (install util-linux)")
    if os.geteuid() != 0:
        why.append("not running as root (SlurmUser=root, munged and `unshare --pid` need root)")
    return why


def parse_scontrol(text: str) -> dict[str, str]:
    """`scontrol -o show job|node` one-line output -> {"JobState": "RUNNING", ...}.

    Values may hold spaces (Command=/a b, Reason=...): a value runs to the next ` Key=`.
    """
    line = text.strip().splitlines()[0] if text.strip() else ""
    keys = list(_KEY.finditer(line))
    out: dict[str, str] = {}
    for i, m in enumerate(keys):
        end = keys[i + 1].start() if i + 1 < len(keys) else len(line)
        out[m.group(1)] = line[m.end():end].strip()
    return out


# ----------------------------------------------------------------------------- cluster


class SlurmCluster(DaemonGroup):
    """munged + slurmctld + N slurmd on this machine; see the module docstring.

    Use `SlurmCluster.start(n, base)`; the object is a context manager whose exit stops it.
    """

    state_file = STATE_FILE
    error = SlurmError
    what = "Slurm"

    def __init__(self, base: Path, nodes: list[Node], *, ctld_port: int, cpus: int,
                 real_memory: int, ready_timeout: float = READY_WAIT_S) -> None:
        super().__init__(base)
        self.base: Path = base
        self.nodes = nodes
        self.ctld_port = ctld_port
        self.cpus = cpus
        self.real_memory = real_memory
        self.conf = base / "slurm.conf"
        self.munge_dir = base / "munge"
        self.log_dir = base / "log"
        self.state_dir = base / "state"
        self.jobs_dir = base / "jobs"
        self.run_dir = base / "run"  # the real directory may be a short one under /tmp
        self._short_run_dir: Path | None = None
        self._ready_timeout = ready_timeout
        self.munged = Daemon("munged", out=self.log_dir / "munged.out",
                             logs=(self.munge_dir / "munged.log",))
        # slurmctld, in its own PID namespace too (its slurmscriptd child dies with it)
        self.controller = Node(name="slurmctld", address="127.0.0.1", port=ctld_port)
        self.controller.daemon = Daemon("slurmctld", out=self.log_dir / "slurmctld.out",
                                        logs=(self.log_dir / "slurmctld.log",))
        for node in nodes:
            node.daemon = Daemon(f"slurmd {node.name}", out=self.log_dir / f"slurmd-{node.name}.out",
                                 logs=(self.log_dir / f"slurmd-{node.name}.log",))
        self._by_name = {n.name: n for n in nodes}
        self._scripts = 0

    def daemons(self) -> list[Daemon]:
        return [*(n.daemon for n in self.nodes), self.controller.daemon, self.munged]

    # -- starting -------------------------------------------------------------------

    @classmethod
    def start(cls, n_nodes: int = 2, base_dir: Path | str = "", *, cpus: int = 2,
              real_memory: int = 1000, first_octet_offset: int = 2, attempts: int = 3,
              ready_timeout: float = READY_WAIT_S) -> SlurmCluster:
        """Start munged, slurmctld and `n_nodes` slurmd under `base_dir` (created; the files
        of an earlier cluster there are replaced, its jobs forgotten).

        Ports are free ones; should another process take one first, start is retried with
        others (`attempts` times). Returns once every node is idle in `sinfo` (at most
        `ready_timeout` s; SlurmError otherwise, with the daemons' logs, and nothing left).
        """
        if n_nodes < 1:
            raise ValueError("n_nodes must be >= 1")
        if not str(base_dir):
            raise ValueError("base_dir is required")
        if first_octet_offset < 1 or n_nodes + first_octet_offset - 1 > 254:
            raise ValueError(f"127.0.0.{first_octet_offset}..{n_nodes + first_octet_offset - 1} "
                             "is not valid")
        if missing := requirements_missing():
            raise SlurmError("cannot start Slurm: " + "; ".join(missing))
        base = Path(base_dir).resolve()

        def attempt() -> SlurmCluster:
            ports = free_ports(n_nodes + 1)
            nodes = [Node(name=host_name(i), address=f"127.0.0.{i + first_octet_offset}",
                          port=ports[i + 1], index=i) for i in range(n_nodes)]
            return cls(base, nodes, ctld_port=ports[0], cpus=cpus, real_memory=real_memory,
                       ready_timeout=ready_timeout)

        return cls._start(attempt, attempts)

    def _boot(self) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        for d in (self.log_dir, self.jobs_dir):
            d.mkdir(exist_ok=True)
        shutil.rmtree(self.state_dir, ignore_errors=True)  # a fresh controller: no old jobs
        self.state_dir.mkdir()
        self._make_run_dir()
        for node in self.nodes:
            (self.run_dir / "spool" / node.name).mkdir(parents=True, exist_ok=True)
        self._start_munged()
        self.conf.write_text(self.slurm_conf())
        self.write_state()
        self._start_slurmctld()
        for node in self.nodes:
            self._launch(node)
        self.write_state()
        self._wait_ready(self._ready_timeout)

    def _make_run_dir(self) -> None:
        if self.run_dir.is_symlink():
            old = self.run_dir.resolve()
            self.run_dir.unlink()
            if old.name.startswith("rb-slurm-") and old.parent == Path(tempfile.gettempdir()):
                shutil.rmtree(old, ignore_errors=True)
        if len(str(self.run_dir)) <= MAX_SOCKET_DIR:
            shutil.rmtree(self.run_dir, ignore_errors=True)
            self.run_dir.mkdir()
        else:
            self._short_run_dir = Path(tempfile.mkdtemp(prefix="rb-slurm-"))
            self.scratch.append(self._short_run_dir)
            self.run_dir.symlink_to(self._short_run_dir)
        self.run_dir.resolve().chmod(0o755)

    @property
    def munge_socket(self) -> Path:
        return self.run_dir.resolve() / "munge.socket"

    def _start_munged(self) -> None:
        self.munge_dir.mkdir(exist_ok=True)
        self.munge_dir.chmod(0o700)
        key = self.munge_dir / "munge.key"
        if not key.exists():
            key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        argv = [MUNGED, "--foreground", "--force", f"--key-file={key}",
                f"--socket={self.munge_socket}", f"--pid-file={self.munge_dir / 'munged.pid'}",
                f"--log-file={self.munge_dir / 'munged.log'}",
                f"--seed-file={self.munge_dir / 'munged.seed'}", "--num-threads=4"]
        self.munged.spawn(argv)
        wait_ready([self.munged], self.munge_socket.is_socket, MUNGE_WAIT_S,
                   lambda: f"munged has no socket {self.munge_socket}: {self.munged.log_tail()}",
                   poll=0.02)

    def slurm_conf(self) -> str:
        run = self.run_dir.resolve()
        lines = [
            "# A real Slurm on one machine: scenarios/clusters/slurm.py",
            f"ClusterName={CLUSTER_NAME}",
            "SlurmctldHost=localhost(127.0.0.1)",
            f"SlurmctldPort={self.ctld_port}",
            f"SlurmdPort={self.nodes[0].port}",  # each node's own Port= below wins
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self.munge_socket}",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"StateSaveLocation={self.state_dir}",
            f"SlurmdSpoolDir={run / 'spool' / '%n'}",
            f"SlurmctldPidFile={self.base / 'slurmctld.pid'}",
            f"SlurmdPidFile={run / 'spool' / '%n' / 'slurmd.pid'}",
            f"SlurmctldLogFile={self.log_dir / 'slurmctld.log'}",
            f"SlurmdLogFile={self.log_dir / 'slurmd-%n.log'}",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "SchedulerType=sched/backfill",
            # a submitted batch job starts at once, not at the next 3 s tick (the default)
            "SchedulerParameters=batch_sched_delay=0",
            "SlurmdParameters=config_overrides",  # CPUs/RealMemory as written, whatever the host
            "ReturnToService=2",
            "MinJobAge=86400",
            "KillWait=2",
            "InactiveLimit=0",
            "MpiDefault=none",
            "MailProg=/bin/true",  # not /usr/bin/mail, absent: an error at every start
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            f"PlugStackConfig={self.base / 'plugstack.conf'}",  # none: not /etc/slurm's
        ]
        for node in self.nodes:
            lines.append(f"NodeName={node.name} NodeHostname={node.name} NodeAddr={node.address} "
                         f"Port={node.port} CPUs={self.cpus} RealMemory={self.real_memory} "
                         "State=UNKNOWN")
        lines.append(f"PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
        return "\n".join(lines) + "\n"

    def _start_slurmctld(self) -> None:
        self.controller.daemon.spawn(
            ["unshare", "--pid", "--fork", "--mount-proc", "--", "/bin/sh", "-c", _CTLD_SH, "sh",
             SLURMCTLD, str(self.conf)], env=self._daemon_env(), namespaced=True)

    def _launch(self, node: Node) -> None:
        """The namespace's pid 1 is a shell that waits for slurmd (see _NODE_SH)."""
        node.daemon.spawn(
            ["unshare", "--pid", "--fork", "--mount-proc", "--uts", "--", "/bin/sh", "-c", _NODE_SH,
             "sh", node.name, SLURMD, str(self.conf)], env=self._daemon_env(), namespaced=True)

    def _daemon_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not _INHERITED.match(k)}
        env["SLURM_CONF"] = str(self.conf)
        return env

    def _wait_ready(self, timeout: float) -> None:
        """Until every node is idle in sinfo (<= timeout s)."""
        seen = {"sinfo": ""}

        def ready() -> bool:
            res = self.run("sinfo", "-h", "-N", "-o", "%N %T", timeout=5, check=False)
            if res.returncode != 0:
                seen["sinfo"] = res.stderr
                return False
            states = self._parse_sinfo(res.stdout)
            seen["sinfo"] = str(states)
            return len(states) == len(self.nodes) and all(
                s.rstrip("*") == "idle" for s in states.values())

        wait_ready(self.daemons(), ready, timeout,
                   lambda: f"Slurm: sinfo {seen['sinfo']}; {self.logs()}", poll=POLL_S)

    def logs(self, n: int = 800) -> str:
        """The tail of every daemon's log, for error messages."""
        parts = []
        for path in [self.munge_dir / "munged.log", *sorted(self.log_dir.glob("*"))]:
            if text := tail(path, n):
                parts.append(f"--- {path.name}:\n{text}")
        return "\n".join(parts)

    # -- information ----------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {"slurm_conf": str(self.conf),
                "munge_socket": str(self.munge_socket), "slurmctld_port": self.ctld_port,
                "partition": PARTITION, "names": self.names(),
                "nodes": [n.to_json() for n in self.nodes],
                "munged_pid": self.munged.pid,
                "slurmctld": self.controller.to_json(),
                "short_run_dir": str(self._short_run_dir or ""), **self.lifecycle_json()}

    def names(self) -> list[str]:
        return [n.name for n in self.nodes]

    def node(self, name: str) -> Node:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"no node {name!r} ({', '.join(self.names())})") from None

    def env(self) -> dict[str, str]:
        """os.environ with SLURM_CONF=BASE/slurm.conf, for Slurm's client commands (sinfo,
        sbatch, srun, scontrol...), without SLURM_*/SBATCH_*/SRUN_* variables of a job this
        process may itself run in."""
        return self._daemon_env()

    def __repr__(self) -> str:
        return f"SlurmCluster({self.base}, nodes={self.names()}, port={self.ctld_port})"

    # -- clients --------------------------------------------------------------------

    def run(self, *argv: str, timeout: float = CLIENT_TIMEOUT_S, check: bool = True,
            cwd: Path | str | None = None) -> subprocess.CompletedProcess[str]:
        """Run a client command (`sinfo`, `srun`, ...) with env(); SlurmError if check and it
        fails or outlives `timeout`."""
        try:
            res = subprocess.run(list(argv), capture_output=True, text=True, env=self.env(),
                                 timeout=timeout, cwd=str(cwd or self.jobs_dir),
                                 stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as exc:
            raise SlurmError(f"`{' '.join(argv)}` still running after {timeout}s") from exc
        if check and res.returncode != 0:
            raise SlurmError(f"`{' '.join(argv)}` rc={res.returncode}: {res.stderr.strip()}")
        return res

    def sinfo(self) -> dict[str, str]:
        """{"node01": "idle", "node02": "mixed", ...} (`sinfo -N -o "%N %T"`)."""
        return self._parse_sinfo(self.run("sinfo", "-h", "-N", "-o", "%N %T").stdout)

    @staticmethod
    def _parse_sinfo(text: str) -> dict[str, str]:
        return dict(line.split(None, 1) for line in text.splitlines() if len(line.split()) == 2)

    def sbatch(self, script: str | Path, *args: str, cwd: Path | str | None = None,
               timeout: float = CLIENT_TIMEOUT_S) -> int:
        """Submit a batch job; returns its id. `script` is the script's text (written under
        BASE/jobs) or the Path of a script file; `args` are sbatch options ("--nodes=2", "-o",
        "/x/%j.out", "--wrap=..." with script=""). Runs in `cwd` (default BASE/jobs), where
        the default output slurm-JOBID.out lands."""
        argv = ["sbatch", "--parsable", *args]
        if isinstance(script, Path):
            argv.append(str(script))
        elif script:
            self._scripts += 1
            path = self.jobs_dir / f"script-{os.getpid()}-{self._scripts}.sh"
            path.write_text(script if script.startswith("#!") else "#!/bin/bash\n" + script)
            path.chmod(0o755)
            argv.append(str(path))
        out = self.run(*argv, timeout=timeout, cwd=cwd).stdout.strip()
        try:
            return int(out.split(";")[0])
        except ValueError:
            raise SlurmError(f"sbatch printed {out!r}, not a job id") from None

    def job(self, job_id: int | str) -> dict[str, str]:
        """`scontrol -o show job ID` as a dict (JobState, NodeList, StdOut, ExitCode...).

        Slurm 22.05's scontrol has no --json (`squeue --json` has; see squeue())."""
        return parse_scontrol(self.run("scontrol", "-o", "show", "job", str(job_id)).stdout)

    def state(self, job_id: int | str) -> str:
        return self.job(job_id).get("JobState", "")

    def output(self, job_id: int | str) -> str:
        """The text of the job's StdOut file ('' while it does not exist)."""
        path = self.job(job_id).get("StdOut", "")
        return tail(Path(path), 1 << 20) if path else ""

    def wait_state(self, job_id: int | str, states: str | Collection[str],
                   timeout: float = 30.0) -> str:
        """Poll until the job's JobState is one of `states` (e.g. "RUNNING", or {"COMPLETED",
        "FAILED"}); returns it. SlurmError after `timeout` s, or as soon as the job has ended
        in a state that is not wanted."""
        wanted = {states} if isinstance(states, str) else set(states)
        final = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                 "PREEMPTED", "BOOT_FAIL", "DEADLINE"}
        deadline = time.monotonic() + timeout
        state = ""
        while True:
            state = self.state(job_id)
            if state in wanted:
                return state
            if state in final:
                raise SlurmError(f"job {job_id} ended {state}, not {sorted(wanted)}: "
                                 f"{self.job(job_id)}")
            if time.monotonic() > deadline:
                raise SlurmError(f"job {job_id} still {state} after {timeout}s, not "
                                 f"{sorted(wanted)}")
            time.sleep(POLL_S)

    def squeue(self, *, all_states: bool = False) -> list[dict[str, Any]]:
        """The jobs of `squeue --json` (pending and running ones; with all_states, the
        finished ones too, for MinJobAge). Note: "standard_output" there is the unexpanded
        pattern (slurm-%j.out); job()["StdOut"] is the real path."""
        argv = ["squeue", "--json"] + (["--states=all"] if all_states else [])
        jobs = json.loads(self.run(*argv).stdout).get("jobs", [])
        return list(jobs)

    def steps(self, job_id: int | str | None = None) -> list[str]:
        """Step ids (`squeue -s`): ["7.batch", "7.0", ...], of one job or of all."""
        argv = ["squeue", "-h", "-s", "-o", "%i"] + (["-j", str(job_id)] if job_id else [])
        res = self.run(*argv, check=False)
        if res.returncode != 0 and "Invalid job id" not in res.stderr:
            raise SlurmError(f"squeue -s rc={res.returncode}: {res.stderr.strip()}")
        return [s.strip() for s in res.stdout.split() if s.strip()]

    def srun(self, job_id: int | str, command: Sequence[str], *, nodes: int | None = None,
             ntasks_per_node: int | None = 1, timeout: float = CLIENT_TIMEOUT_S,
             check: bool = True) -> subprocess.CompletedProcess[str]:
        """`srun --jobid ID --overlap [--nodes N] [--ntasks-per-node K] COMMAND...`: a step in
        an allocation that is already busy (the batch step holds its CPUs: --overlap)."""
        argv = ["srun", "--jobid", str(job_id), "--overlap"]
        if nodes is not None:
            argv += ["--nodes", str(nodes)]
        if ntasks_per_node is not None:
            argv += ["--ntasks-per-node", str(ntasks_per_node)]
        return self.run(*argv, *command, timeout=timeout, check=check)

    def scancel(self, *job_ids: int | str) -> None:
        self.run("scancel", *[str(j) for j in job_ids])

    def node_processes(self, name: str) -> list[tuple[int, str]]:
        """(pid as seen here, command line) of every process in the node's PID namespace:
        its shell (pid 1), slurmd, step daemons and job processes."""
        return self._ns_processes(self.node(name))

    @staticmethod
    def _ns_processes(node: Node) -> list[tuple[int, str]]:
        return [(pid, cmdline(pid)) for pid in namespace_pids(node.ns_init_pid)]

    # -- stopping -------------------------------------------------------------------

    def kill_node(self, name: str, wait: float = KILL_WAIT_S) -> bool:
        """SIGKILL a node: its slurmd and every job process on it die at once (the
        controller notices after SlurmdTimeout). True once all of it is gone."""
        return stop_all([self.node(name).daemon], wait)


def down(base: Path | str, wait: float = KILL_WAIT_S) -> int:
    """Kill the daemons recorded in BASE/slurm.json (for when `up` itself was killed): each
    node's namespace (its pid 1: every job process dies with it), then the process groups
    of the `unshare`s, slurmctld and munged. Returns how many recorded pids were killed."""
    return group.down(base, STATE_FILE, wait)


# ----------------------------------------------------------------------------- CLI


def _add_up_arguments(up: argparse.ArgumentParser) -> None:
    up.add_argument("--cpus", type=int, default=2, help="CPUs of each node (default 2)")


COMMAND = ClusterCommand(
    prog="python3 -m scenarios.clusters.slurm",
    description="A real Slurm on this machine: munged, slurmctld and N slurmd (each in its own "
                "PID/UTS namespace)",
    members="nodes", dir_help="slurm.conf, logs, state", state_file=STATE_FILE,
    start=lambda args: SlurmCluster.start(args.n, Path(args.dir), cpus=args.cpus),
    add_arguments=_add_up_arguments,
    describe=lambda sl: f"{len(sl.nodes)} nodes up in {sl.startup_s:.2f}s; try: "
                        f"SLURM_CONF={sl.conf} sinfo")
main = COMMAND.main


if __name__ == "__main__":
    sys.exit(main())
