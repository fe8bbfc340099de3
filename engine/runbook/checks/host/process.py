"""`process`: find the job's training processes on a node and report state, CPU, memory and ranks.

Which processes are the job's is decided by evidence (host/_job.py): the log they write, the
launcher's tree, the PIDs the log prints, the script its traceback names. Python processes
with torch loaded that nothing ties to the job are reported as `foreign`, never taken for it.
"""

from __future__ import annotations

import os
import re
import time
from typing import TYPE_CHECKING, Any

from runbook.checks import _procfs
from runbook.checks.base import CheckContext
from runbook.checks.host import _job

NAME = "process"
SUMMARY = {
    "en": "Find the training processes on the node: state, CPU use, memory, threads, ranks",
    "zh": "查找节点上的训练进程：状态、CPU 占用、内存、线程数和 rank",
}
PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "pid": {
            "type": ["integer", "string"],
            "description": 'Look at this one process id ("" means not given)',
        },
        "match": {
            "type": "string",
            "description": "Regex searched in each process's full command line",
        },
        "auto": {
            "type": "boolean",
            "default": True,
            "description": "With no pid or match: the processes tied to the job (see log); "
            "without a log, those a launcher gave RANK/LOCAL_RANK/WORLD_SIZE, else the one "
            "Python process with libtorch mapped",
        },
        "log": {
            "type": "string",
            "description": "The job's log (glob: the newest match). With no pid or match, the "
            "job's processes are those holding it open (and their process group and launcher "
            "tree), those it names by PID, or those running the script its traceback names; "
            '"" means not given',
        },
    },
    "additionalProperties": False,
}
# The parameters of every check that selects the job's processes as this one does (stack, nccl,
# flight_recorder), beside their own `pid` and `match` descriptions.
LOG_PARAM: dict[str, Any] = {
    "type": "string",
    "description": "The job's log: with no pid or match, the processes tied to it are the job's (see "
                   "the process check)",
}
_PROC_FIELDS = (
    "pid, ppid, cmdline, state, cpu_percent, rss_mib, threads, age_s, rank, local_rank, "
    "world_size, zombie, tied_by"
)
_TIES = ("pid, match, log-writer, process-group, launcher, same-job, log-pid, script, launcher-env, "
         "only-torch-process")
RESULT_FIELDS = {
    "found": {"type": "boolean", "en": "At least one process was selected",
              "zh": "至少找到了一个进程"},
    "count": {"type": "integer", "en": "Number of processes selected", "zh": "找到的进程数"},
    "how": {"type": "string", "en": "How processes were selected: pid, match or auto",
            "zh": "进程的选择方式：pid、match 或 auto"},
    "reason": {"type": "string", "en": "Why nothing was found (null when found)",
               "zh": "未找到进程的原因（找到时为 null）"},
    "unreadable": {"type": "integer",
                   "en": "Processes skipped because /proc could not be read (permissions)",
                   "zh": "因无权读取 /proc 而跳过的进程数"},
    "processes": {"type": "array",
                  "en": f"Selected processes, busiest first: {{{_PROC_FIELDS}}}",
                  "zh": f"找到的进程列表，按 CPU 占用从高到低：{{{_PROC_FIELDS}}}"},
    "pid": {"type": "integer", "en": "PID of the busiest process (null when none)",
            "zh": "CPU 占用最高的进程 PID（没有进程时为 null）"},
    "cpu_percent": {"type": "number",
                    "en": "Highest CPU use, percent of one core (100 = one core busy; 0.0 "
                          "when none)",
                    "zh": "最高 CPU 占用，以单核百分比计（100 表示占满一个核；没有进程时为 0.0）"},
    "state": {"type": "string",
              "en": "Kernel state letter of the busiest process (R, S, D, Z, T...)",
              "zh": "CPU 占用最高的进程的内核状态字母（R、S、D、Z、T 等）"},
    "threads": {"type": "integer", "en": "Thread count of the busiest process",
                "zh": "CPU 占用最高的进程的线程数"},
    "age_s": {"type": "number", "en": "Seconds since the busiest process started",
              "zh": "CPU 占用最高的进程已运行的秒数"},
    "d_state": {"type": "boolean",
                "en": "Some process is in D state (uninterruptible sleep, stuck in the kernel)",
                "zh": "有进程处于 D 状态（不可中断睡眠，卡在内核中）"},
    "zombies": {"type": "integer", "en": "Number of zombie (Z state) processes selected",
                "zh": "找到的僵尸进程（Z 状态）数量"},
    "ranks": {"type": "array", "en": "Distinct RANK values found, sorted",
              "zh": "找到的不同 RANK 值，已排序"},
    "tied_by": {"type": "string",
                "en": f"How the busiest process is tied to the job: one of {_TIES} (null when none)",
                "zh": f"CPU 占用最高的进程与作业的关联方式：{_TIES} 之一（没有进程时为 null）"},
    "job_exited": {"type": "boolean",
                   "en": "A log was given and no live process is tied to it: the job has exited",
                   "zh": "给出了日志，但没有任何存活进程与之关联：作业已经退出"},
    "log": {"type": "string", "en": "The log the job was tied by (null when none was given or found)",
            "zh": "用于关联作业的日志（未给出或未找到时为 null）"},
    "log_writers": {"type": "array", "en": "PIDs holding the log open", "zh": "打开该日志文件的进程 PID"},
    "foreign": {"type": "array",
                "en": "Python processes with torch loaded or a launcher's RANK/WORLD_SIZE that nothing "
                      "ties to the job (a stale notebook, the previous run): {pid, cmdline, why}",
                "zh": "加载了 torch 或带有启动器 RANK/WORLD_SIZE、但与作业没有任何关联的 Python 进程"
                      "（遗留的 notebook、上一次运行）：{pid, cmdline, why}"},
    "foreign_pids": {"type": "array", "en": "The PIDs of `foreign`", "zh": "`foreign` 中的 PID"},
    "pids": {"type": "array", "en": "PIDs of every selected (job) process",
             "zh": "所有选中（作业）进程的 PID"},
}
DEFAULT_TIMEOUT = 5.0

_CMDLINE_MAX = 300
_LIST_MAX = 100
_MIB = 1024 * 1024


def run(params: dict[str, Any], ctx: CheckContext) -> dict[str, Any]:
    how, (selected, unreadable, reason), ties = select(params, time.monotonic() + ctx.remaining() / 2)
    processes = _describe(selected, ctx)
    if not processes and reason is None:
        reason = "the selected processes exited during the check"
    return {**_summarise(how, processes, unreadable, reason), **_tie_fields(ties)}


def select(params: dict[str, Any], deadline: float | None = None) -> tuple[str, Selection, _job.Ties]:
    """How processes were chosen, the selection, and what ties them to the job."""
    pid = _pid_param(params.get("pid"))
    if pid is not None:
        selection = _select_pid(pid)
        return "pid", selection, _job.Ties(tied=dict.fromkeys(selection[0], "pid"))
    if params.get("match"):
        selection = _select_match(str(params["match"]))
        return "match", selection, _job.Ties(tied=dict.fromkeys(selection[0], "match"))
    if _flag(params.get("auto"), default=True):
        return ("auto", *_select_auto(str(params.get("log") or ""),
                                      deadline if deadline is not None else time.monotonic() + 2.0))
    return "auto", ({}, 0, "no pid or match given and auto is off"), _job.Ties()


def _select(params: dict[str, Any]) -> tuple[str, Selection]:
    """`select` without the ties: what the checks that dump or read the job's processes use."""
    how, selection, _ties = select(params)
    return how, selection


def _tie_fields(ties: _job.Ties) -> dict[str, Any]:
    return {"job_exited": ties.exited, "log": ties.log, "log_writers": ties.log_writers[:_LIST_MAX],
            "foreign": ties.foreign, "foreign_pids": [f["pid"] for f in ties.foreign]}


def _flag(value: Any, default: bool) -> bool:
    """A boolean parameter that templating may have turned into a string ("" = not given)."""
    if value is None or value == "":
        return default
    if isinstance(value, str):
        return value.strip().lower() not in ("false", "0", "no", "off")
    return bool(value)


def _pid_param(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        return -1  # something given that is no pid: reported as not found


# -- selection: (pid -> {"stat", "env"}, unreadable count, reason or None) ---------------------

if TYPE_CHECKING:  # annotations only: the alias never runs, so nodes' Python 3.8 is fine
    Selection = tuple[dict[int, dict[str, Any]], int, str | None]


def _select_pid(pid: int) -> Selection:
    if pid <= 0:
        return {}, 0, f"no process with pid {pid}"
    try:
        return {pid: {"stat": _procfs.stat(pid), "tied_by": "pid"}}, 0, None
    except FileNotFoundError:
        return {}, 0, f"no process with pid {pid}"
    except (PermissionError, ProcessLookupError):
        return {}, 1, f"no permission to read /proc/{pid}"
    except OSError as exc:
        return {}, 0, f"cannot read /proc/{pid}: {exc}"


def _others() -> tuple[list[tuple[int, dict[str, Any]]], int]:
    """(pid, stat) of every process except the probe and its ancestors; unreadable count."""
    excluded = _procfs.ancestors(os.getpid())
    found: list[tuple[int, dict[str, Any]]] = []
    unreadable = 0
    for pid in _procfs.pids():
        if pid in excluded:
            continue
        try:
            found.append((pid, _procfs.stat(pid)))
        except PermissionError:
            unreadable += 1
        except (OSError, ValueError, IndexError):
            continue  # exited meanwhile
    return found, unreadable


def _select_match(pattern: str) -> Selection:
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        return {}, 0, f"invalid match regex {pattern!r}: {exc}"
    selected: dict[int, dict[str, Any]] = {}
    candidates, unreadable = _others()
    for pid, st in candidates:
        try:
            text = " ".join(_procfs.cmdline(pid)) or f"[{st['comm']}]"
        except PermissionError:
            unreadable += 1
            continue
        except OSError:
            continue
        if regex.search(text):
            selected[pid] = {"stat": st, "tied_by": "match"}
    reason = None if selected else f"no process command line matches /{pattern}/"
    return selected, unreadable, reason


def _is_python(pid: int, argv: list[str]) -> bool:
    names = [os.path.basename(_procfs.exe(pid) or "")]
    if argv:
        names.append(os.path.basename(argv[0]))
    return any(name.startswith("python") for name in names)


def _candidate(pid: int, st: dict[str, Any]) -> tuple[_job.Candidate | None, int]:
    """A Python process as a candidate for the job (None for anything else); unreadable count."""
    argv = _procfs.cmdline(pid)
    if not _is_python(pid, argv):
        return None, 0
    env: dict[str, str] | None = None
    denied = 0
    try:
        env = _procfs.environ(pid)
    except PermissionError:
        denied += 1
    launched = env is not None and any(name in env for name in _job.LAUNCH_VARS)
    torch = False
    if not launched:
        try:
            torch = _procfs.maps_contain(pid, b"libtorch")
        except PermissionError:
            denied += 1
    return _job.Candidate(pid, st, env, argv, launched, torch), int(denied == 2)


def _select_auto(log: str, deadline: float) -> tuple[Selection, _job.Ties]:
    candidates: dict[int, _job.Candidate] = {}
    others, unreadable = _others()
    for pid, st in others:
        try:
            candidate, denied = _candidate(pid, st)
        except OSError:
            continue
        unreadable += denied
        if candidate is not None:
            candidates[pid] = candidate
    ties = _job.tie(candidates, others, log, deadline)
    selected = {pid: {"stat": c.stat, "env": c.env, "tied_by": ties.tied[pid]}
                for pid, c in candidates.items() if pid in ties.tied}
    # A rank that died but was never reaped is a finding: keep zombie children of selected ones.
    for pid, st in others:
        if st["state"] == "Z" and st["ppid"] in selected and pid not in selected:
            selected[pid] = {"stat": st, "env": {}, "tied_by": "launcher"}
    return (selected, unreadable, None if selected else _no_job(ties)), ties


def _no_job(ties: _job.Ties) -> str:
    if ties.note:
        return ties.note
    return ("no training process found (no log given; no Python process a launcher started or "
            "with libtorch mapped)")


# -- description -------------------------------------------------------------------------------


def _describe(selected: dict[int, dict[str, Any]], ctx: CheckContext) -> list[dict[str, Any]]:
    """Sample CPU over a short interval and describe each selected process that still exists."""
    if not selected:
        return []
    first = {pid: _cpu_ticks(pid) for pid in selected}
    start = time.monotonic()
    time.sleep(min(0.5, ctx.remaining() / 3))
    uptime, ticks, page = _procfs.uptime(), _procfs.clock_ticks(), _procfs.page_size()
    described: list[dict[str, Any]] = []
    for pid, info in selected.items():
        try:
            st = _procfs.stat(pid)
        except (OSError, ValueError, IndexError):
            continue  # exited during the sample
        elapsed = max(time.monotonic() - start, 1e-3)
        before = first[pid]
        busy = 0.0 if before is None else (st["utime"] + st["stime"] - before) / ticks
        entry = _process_entry(pid, st, info.get("env"), busy / elapsed * 100,
                               uptime - st["starttime"] / ticks, page)
        described.append({**entry, "tied_by": info.get("tied_by")})
    described.sort(key=lambda p: (-p["cpu_percent"], p["pid"]))
    return described


def _cpu_ticks(pid: int) -> int | None:
    try:
        st = _procfs.stat(pid)
    except (OSError, ValueError, IndexError):
        return None
    return st["utime"] + st["stime"]


def _process_entry(
    pid: int, st: dict[str, Any], env: dict[str, str] | None, cpu: float, age: float, page: int
) -> dict[str, Any]:
    if env is None:
        try:
            env = _procfs.environ(pid)
        except OSError:
            env = {}
    try:
        text = " ".join(_procfs.cmdline(pid))
    except OSError:
        text = ""
    return {
        "pid": pid,
        "ppid": st["ppid"],
        "cmdline": (text or f"[{st['comm']}]")[:_CMDLINE_MAX],
        "state": st["state"],
        "cpu_percent": round(max(cpu, 0.0), 1),
        "rss_mib": round(st["rss_pages"] * page / _MIB, 1),
        "threads": st["threads"],
        "age_s": round(max(age, 0.0), 1),
        "rank": env_rank(env, "RANK"),
        "local_rank": env_rank(env, "LOCAL_RANK"),
        "world_size": env_rank(env, "WORLD_SIZE"),
        "zombie": st["state"] == "Z",
    }


# A rank launched by srun without a launcher of its own has Slurm's names only.
_SLURM_NAMES = {"RANK": "SLURM_PROCID", "LOCAL_RANK": "SLURM_LOCALID", "WORLD_SIZE": "SLURM_NTASKS"}


def env_rank(env: dict[str, str], name: str) -> int | None:
    """RANK, LOCAL_RANK or WORLD_SIZE from a process's environment; Slurm's own name for it
    (SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS) when torch's is not set."""
    value = _env_int(env, name)
    return value if value is not None or name not in _SLURM_NAMES else _env_int(env, _SLURM_NAMES[name])


def _env_int(env: dict[str, str], name: str) -> int | None:
    try:
        return int(env[name])
    except (KeyError, ValueError):
        return None


def _summarise(
    how: str, processes: list[dict[str, Any]], unreadable: int, reason: str | None
) -> dict[str, Any]:
    top = processes[0] if processes else {}
    return {
        "found": bool(processes),
        "count": len(processes),
        "how": how,
        "reason": None if processes else reason,
        "unreadable": unreadable,
        "processes": processes[:_LIST_MAX],
        "pid": top.get("pid"),
        "cpu_percent": top.get("cpu_percent", 0.0),
        "state": top.get("state"),
        "threads": top.get("threads"),
        "age_s": top.get("age_s"),
        "d_state": any(p["state"] == "D" for p in processes),
        "zombies": sum(1 for p in processes if p["zombie"]),
        "ranks": sorted({p["rank"] for p in processes if p["rank"] is not None}),
        "tied_by": top.get("tied_by"),
        "pids": [p["pid"] for p in processes[:_LIST_MAX]],
    }
