"""Start and stop scenario jobs: small, real, CPU-only training jobs that are in trouble.

Standard library only (the launcher also runs on test-cluster nodes with a bare
python3). A scenario job is started detached, in its own session and process
group, with the environment torchrun gives rank 0 of a one-process job, its
stdout and stderr appended to WORKDIR/train.log. WORKDIR/scenario.json records
what a diagnosing tool or another process needs (pid, log, PATH to use) so that
`python3 -m scenarios stop --dir WORKDIR` works from anywhere. What each job is: the
registry (registry.py).

A scenario with a `bystander` (registry.py) also has a process that is not the job's: the
launcher starts it first, as `python3 -c CODE WORKDIR` (CODE: the bystander file without its
full-line comments), in a session of its own, with this environment less what torchrun sets
(RANK, WORLD_SIZE, MASTER_*...), in the user's home directory, its output appended to
WORKDIR/bystander.log; it waits (bounded) until the bystander has written its first line there,
then starts the job. The bystander outlives the job; `stop()` ends it too.

    from scenarios.jobs import start
    sc = start("loader_accumulating", tmp_path, speed=4)
    try:
        sc.wait_for_log(r"Token buffer: \\d+/65537", timeout=10)
        ...                                   # diagnose it
    finally:
        sc.stop()
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from scenarios.jobs.registry import SCENARIO_ROOT, SCENARIOS, ScenarioSpec

STATE_FILE = "scenario.json"
LOG_FILE = "train.log"
BYSTANDER_LOG = "bystander.log"
BYSTANDER_READY_S = 120.0  # it imports torch, on a busy 2-core machine
STOP_TIMEOUT_S = 5.0
# What torchrun gives a rank: a bystander has none of it (it is nobody's rank).
LAUNCHER_VARS = ("RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
                 "ROLE_WORLD_SIZE", "GROUP_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                 "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS")


class ScenarioError(RuntimeError):
    """A scenario cannot be started, found or stopped."""


@dataclass
class Scenario:
    """A started scenario job (also what WORKDIR/scenario.json holds)."""

    name: str
    pid: int
    log: Path
    workdir: Path
    path_prepend: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    pgid: int = 0
    log_offset: int = 0  # size of the log before this job wrote to it
    argv: list[str] = field(default_factory=list)
    speed: float = 1.0
    taxonomy: str | None = None
    started_at: float = 0.0  # time.time()
    proc_start_ticks: int | None = None  # /proc/PID/stat starttime, guards against pid reuse
    bystander_pid: int | None = None  # the bystander (a session and group of its own), if any
    bystander_start_ticks: int | None = None
    _proc: subprocess.Popen[bytes] | None = field(default=None, repr=False, compare=False)
    _bystander: subprocess.Popen[bytes] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.log = Path(self.log)
        self.workdir = Path(self.workdir)
        if not self.pgid:
            self.pgid = self.pid

    # ------------------------------------------------------------------ state

    def to_json(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self) if not f.name.startswith("_")}
        data["log"] = str(self.log)
        data["workdir"] = str(self.workdir)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Scenario:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__ and k[0] != "_"}
        return cls(**known)

    def save(self) -> Path:
        path = self.workdir / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n")
        tmp.replace(path)
        return path

    # ------------------------------------------------------------------ process

    def is_alive(self) -> bool:
        """True while any non-zombie process of the job's group exists."""
        return bool(group_members(self.pgid)) if self._owns_group() else False

    def bystander_alive(self) -> bool:
        """True while the scenario's bystander (its own process group) has a live process."""
        if self.bystander_pid is None or not _same_process(self.bystander_pid, self.bystander_start_ticks):
            return False
        return bool(group_members(self.bystander_pid))

    def _owns_group(self) -> bool:
        """False when the leader's pid now belongs to a different process (pid reuse)."""
        return _same_process(self.pgid, self.proc_start_ticks)

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> bool:
        """SIGKILL the job's whole process group, and the bystander's, and wait (bounded) until
        they are gone.

        Waits until os.killpg(pgid, 0) says a group is gone (killed workers are
        reaped by init). Returns True then, or at the deadline when only zombies
        are left (a container whose init does not reap); False if any live process
        of either group survived.
        """
        deadline = time.monotonic() + max(0.0, timeout)
        groups = [(self.pgid, self._owns_group(), self._proc)]
        if self.bystander_pid is not None:
            groups.append((self.bystander_pid, _same_process(self.bystander_pid, self.bystander_start_ticks),
                           self._bystander))
        for pgid, owned, _ in groups:
            if owned:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, signal.SIGKILL)
        gone = [_wait_group_gone(pgid, proc, deadline) for pgid, _, proc in groups]
        return all(gone)

    def wait_for_log(self, pattern: str, timeout: float) -> bool:
        """Poll the log (from where this job started writing) for a regex; bounded."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            if regex.search(self.read_log()):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)

    def read_log(self) -> str:
        """What this job has written to its log so far."""
        try:
            with self.log.open("rb") as fh:
                fh.seek(self.log_offset)
                return fh.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def tool_env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """The environment a diagnosing tool should run with (base: os.environ)."""
        env = dict(os.environ if base is None else base)
        env.update(self.env)
        return env


# ---------------------------------------------------------------------- helpers


def _wait_group_gone(pgid: int, proc: subprocess.Popen[bytes] | None, deadline: float) -> bool:
    """Wait (until `deadline`) for a killed process group to vanish: True once it has, or at the
    deadline when only zombies are left; False if a live process of it survived."""
    if proc is not None:  # our child: reap it, or it stays a zombie of ours
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    # Killed workers whose parent died are reaped by init a moment later; wait for the
    # group to vanish entirely, but where nobody reaps, zombies alone count as stopped.
    while True:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass
        if time.monotonic() >= deadline:
            return not group_members(pgid)
        time.sleep(0.05)


def _same_process(pid: int, start_ticks: int | None) -> bool:
    """False when `pid` now belongs to a different process than the one started (pid reuse)."""
    if start_ticks is None:
        return True
    ticks = _start_ticks(pid)
    return ticks is None or ticks == start_ticks


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name (index 0 is the state)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rfind(")") + 2:].split()


def _start_ticks(pid: int) -> int | None:
    st = _stat_fields(pid)
    return int(st[19]) if st and len(st) > 19 else None


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group."""
    proc = Path("/proc")
    if not proc.is_dir():  # not Linux: ask the kernel, zombies included
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return []
        except PermissionError:
            pass
        return [pgid]
    members = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        st = _stat_fields(int(entry.name))
        if st and len(st) > 2 and int(st[2]) == pgid and st[0] not in "ZX":
            members.append(int(entry.name))
    return members


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def default_python() -> str:
    """A python3 for the job: this interpreter, named python3 where that name exists."""
    exe = Path(sys.executable)
    sibling = exe.with_name("python3")
    if exe.name != "python3" and sibling.exists():
        return str(sibling)
    return str(exe) if sys.executable else (shutil.which("python3") or "python3")


def _install_fake_bin(spec: ScenarioSpec, workdir: Path) -> str | None:
    """Copy the scenario's fake tools into WORKDIR/bin (executable) and return that dir."""
    if spec.fake_bin is None:
        return None
    src = SCENARIO_ROOT / spec.fake_bin
    dst = workdir / "bin"
    dst.mkdir(parents=True, exist_ok=True)
    for tool in sorted(src.iterdir()):
        if tool.is_file():
            target = dst / tool.name
            shutil.copyfile(tool, target)
            target.chmod(0o755)
    return str(dst)


def _bystander_code(spec: ScenarioSpec) -> str:
    """The bystander's program for `python3 -c`: its file without full-line comments and blank
    lines (they explain it to a reader of the file; `ps` shows only the program)."""
    text = (SCENARIO_ROOT / str(spec.bystander)).read_text()
    return "\n".join(line for line in text.splitlines()
                     if line.strip() and not line.lstrip().startswith("#"))


def _start_bystander(spec: ScenarioSpec, workdir: Path, interpreter: str) -> subprocess.Popen[bytes]:
    """Start the scenario's bystander (see the module docstring) and wait, bounded, until it has
    written its first line; raise ScenarioError (and kill it) when it exits or stays silent."""
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    env["PYTHONUNBUFFERED"] = "1"
    home = os.path.expanduser("~")  # someone's session, not the job's directory
    log = workdir / BYSTANDER_LOG
    with log.open("ab") as fh:
        offset = fh.tell()
        proc = subprocess.Popen(
            [interpreter, "-c", _bystander_code(spec), str(workdir)],
            cwd=home if os.path.isdir(home) else "/", env=env, stdin=subprocess.DEVNULL, stdout=fh,
            stderr=subprocess.STDOUT, start_new_session=True, close_fds=True,
        )
    deadline = time.monotonic() + BYSTANDER_READY_S
    while log.stat().st_size <= offset and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    if log.stat().st_size > offset and proc.poll() is None:
        return proc
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=STOP_TIMEOUT_S)
    with log.open("rb") as fh:
        fh.seek(offset)
        said = fh.read().decode("utf-8", "replace").strip()[-2000:]
    raise ScenarioError(f"scenario {spec.name!r}: its bystander (pid {proc.pid}) did not start "
                        f"(exit status {proc.returncode}): {said or 'no output'}")


def _has_module(interpreter: str, module: str) -> bool:
    """Whether `interpreter` finds `module` (without importing it)."""
    code = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    try:
        return subprocess.run([interpreter, "-c", code], capture_output=True,
                              timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def load(workdir: Path | str) -> Scenario:
    """The scenario recorded in WORKDIR/scenario.json."""
    path = Path(workdir) / STATE_FILE
    try:
        return Scenario.from_json(json.loads(path.read_text()))
    except FileNotFoundError:
        raise ScenarioError(f"no scenario recorded in {path}") from None
    except (ValueError, TypeError) as exc:
        raise ScenarioError(f"unreadable {path}: {exc}") from None


# ---------------------------------------------------------------------- start / stop


def start(
    name: str,
    workdir: Path | str,
    speed: float = 1.0,
    env: dict[str, str] | None = None,
    python: str | None = None,
    extra_args: list[str] | None = None,
) -> Scenario:
    """Start scenario `name` detached in `workdir`; return its handle (also saved as JSON).

    `env` overrides the job's environment (e.g. RANK/WORLD_SIZE for a multi-host
    cluster); `python` is the interpreter (default: this one); `extra_args` go to
    train.py after the standard ones.
    """
    spec = SCENARIOS.get(name)
    if spec is None:
        raise ScenarioError(f"unknown scenario {name!r}; known: {', '.join(sorted(SCENARIOS))}")
    if speed <= 0:
        raise ScenarioError(f"speed must be positive, got {speed}")
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        previous = load(workdir)
    except ScenarioError:
        previous = None
    if previous is not None and (previous.is_alive() or previous.bystander_alive()):
        raise ScenarioError(f"{workdir} already runs scenario {previous.name!r} "
                            f"(pid {previous.pid}); stop it first")

    path_prepend = _install_fake_bin(spec, workdir)
    tool_env = {"PATH": f"{path_prepend}{os.pathsep}{os.environ.get('PATH', '')}"} \
        if path_prepend else {}

    job_env = dict(os.environ)
    job_env.update({
        "RANK": "0", "LOCAL_RANK": "0", "GROUP_RANK": "0", "WORLD_SIZE": "1",
        "LOCAL_WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()),
        "PYTHONUNBUFFERED": "1",
    })
    job_env.update(env or {})

    interpreter = python or default_python()
    missing = [m for m in spec.requires if not _has_module(interpreter, m)]
    if missing:
        raise ScenarioError(f"scenario {name!r} needs {', '.join(missing)}, which {interpreter} "
                            "cannot import (pass python=... / use an environment that has it)")
    script = SCENARIO_ROOT / spec.script
    argv = [interpreter, str(script), "--speed", f"{speed:g}"]
    if name == "loader_accumulating":
        argv += ["--data-dir", str(workdir / "data")]
    argv += list(extra_args or [])

    bystander = _start_bystander(spec, workdir, interpreter) if spec.bystander else None
    log = workdir / LOG_FILE
    with log.open("ab") as fh:
        offset = fh.tell()
        proc = subprocess.Popen(
            argv, cwd=workdir, env=job_env, stdin=subprocess.DEVNULL, stdout=fh,
            stderr=subprocess.STDOUT, start_new_session=True, close_fds=True,
        )
    scenario = Scenario(
        name=name, pid=proc.pid, log=log, workdir=workdir, path_prepend=path_prepend,
        env=tool_env, pgid=proc.pid, log_offset=offset, argv=argv, speed=speed,
        taxonomy=spec.taxonomy, started_at=time.time(), proc_start_ticks=_start_ticks(proc.pid),
        bystander_pid=bystander.pid if bystander else None,
        bystander_start_ticks=_start_ticks(bystander.pid) if bystander else None,
        _proc=proc, _bystander=bystander,
    )
    scenario.save()
    return scenario


def stop_dir(workdir: Path | str, timeout: float = STOP_TIMEOUT_S) -> Scenario:
    """Stop the scenario recorded in `workdir` (from any process); raise if it survives."""
    scenario = load(workdir)
    if not scenario.stop(timeout):
        raise ScenarioError(f"scenario {scenario.name!r} (pgid {scenario.pgid}"
                            + (f", bystander {scenario.bystander_pid}" if scenario.bystander_pid else "")
                            + f") still has live processes after {timeout:g}s")
    return scenario
