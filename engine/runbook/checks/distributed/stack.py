"""`stack`: the Python stacks of the training processes (py-spy dump), and where each one waits.

Every selected process is dumped with `py-spy dump --json --pid PID` (in parallel, under the
check's deadline). Each thread is classified by its frames, innermost first: a collective in
torch.distributed, the DataLoader, ray.get/ray.wait, a CUDA synchronize, the torch extensions
lock (`FileBaton.wait`), a lock (a lock's `acquire` frame, or an idle thread the kernel shows in a
futex wait, /proc/PID/task/TID/wchan), socket/file I/O, else running (or idle, when py-spy says
so). The ranks' main threads are then compared: ranks
waiting in different collectives (or some in a collective and some not) took different code
paths, the classic distributed hang.

Processes are selected like the `process` check does. A selected process whose selected
children carry other ranks (torchrun's agent, a launcher script) is a `launcher`; children that
carry their parent's rank (DataLoader workers) are `worker`s; neither counts as a rank.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from runbook.checks import _procfs
from runbook.checks.base import CheckContext
from runbook.checks.facts import stackframes
from runbook.checks.host import process

NAME = "stack"
SUMMARY = {
    "en": "Python stacks of the training processes (py-spy dump) and where each rank waits: "
          "collective op, DataLoader, ray.get, CUDA sync, the torch extensions lock, a lock (futex), "
          "I/O; ranks stuck in different collectives",
    "zh": "训练进程的 Python 调用栈（py-spy dump）以及每个 rank 等在哪里：集合通信操作、DataLoader、"
          "ray.get、CUDA 同步、torch 扩展目录的锁、一把锁（futex）、I/O；找出卡在不同集合通信操作中的 rank",
}
PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "pid": {"type": ["integer", "string"],
                "description": 'Dump this one process id ("" means not given)'},
        "match": {"type": "string",
                  "description": "Regex searched in each process's full command line"},
        "log": process.LOG_PARAM,
        "native": {"type": "boolean", "default": False,
                   "description": "Also show native (C/C++) frames: py-spy dump --native (slower)"},
        "py_spy": {"type": "string", "minLength": 1, "default": "py-spy",
                   "description": "py-spy to run: a path, or a name looked up on PATH, next to the "
                                  "probe's Python and next to the training processes' Python"},
    },
    "additionalProperties": False,
}
_THREAD_FIELDS = "thread_id, name, idle, waits, op, innermost, user_frame, frames, wchan"
_PROC_FIELDS = (f"pid, ppid, rank, role, cmdline, error, threads: [{{{_THREAD_FIELDS}}}], main_wait, "
                "main_op, main_user_frame, main_frame, main_wchan, world_size, master, extensions_dir")
_WAITS = ", ".join(stackframes.WAITS)
RESULT_FIELDS = {
    "available": {"type": "boolean",
                  "en": "py-spy ran and could dump at least one selected process (true when none "
                        "was found)",
                  "zh": "py-spy 可以运行，并且至少导出了一个选中进程的调用栈（没有找到进程时也为 true）"},
    "reason": {"type": "string",
               "en": "Why stacks are missing: py-spy not installed, permission denied (with the fix), "
                     "no process found (null when every process was dumped)",
               "zh": "缺少调用栈的原因：未安装 py-spy、权限不足（附修复方法）、没有找到进程"
                     "（全部导出成功时为 null）"},
    "py_spy": {"type": "string", "en": "Path of the py-spy that was run (null when not found)",
               "zh": "实际运行的 py-spy 路径（未找到时为 null）"},
    "how": {"type": "string", "en": "How processes were selected: pid, match or auto",
            "zh": "进程的选择方式：pid、match 或 auto"},
    "found": {"type": "boolean", "en": "At least one process was selected", "zh": "至少找到了一个进程"},
    "permission_denied": {"type": "boolean",
                          "en": "py-spy was not allowed to attach (ptrace) to some process",
                          "zh": "py-spy 无权附加（ptrace）到某些进程"},
    "processes": {"type": "array",
                  "en": f"One entry per selected process: {{{_PROC_FIELDS}}}. role: rank, launcher (its "
                        "children carry other ranks) or worker (a child with its parent's rank, e.g. a "
                        f"DataLoader worker). waits: one of {_WAITS}; op: the collective op (all_reduce, "
                        "barrier, ...), ray.get / ray.wait, or the blocking function; innermost and "
                        "user_frame are \"file:line function\" (user_frame: innermost frame outside "
                        "site-packages and the standard library); frames: the innermost 8",
                  "zh": f"每个选中进程一项：{{{_PROC_FIELDS}}}。role：rank、launcher（其子进程带有其他 "
                        "rank）或 worker（与父进程 rank 相同的子进程，如 DataLoader worker）。waits 取值："
                        f"{_WAITS}；op：集合通信操作名（all_reduce、barrier 等）、ray.get / ray.wait "
                        "或阻塞所在的函数；innermost 和 user_frame 格式为 \"文件:行号 函数\"（user_frame："
                        "不在 site-packages 和标准库中的最内层帧）；frames：最内层的 8 帧"},
    "ranks": {"type": "object",
              "en": "RANK (as a string) -> {pid, wait, op, user_frame, world_size, master} of each "
                    "rank's main thread (wait null when its stack could not be dumped; master is "
                    "MASTER_ADDR:MASTER_PORT)",
              "zh": "RANK（字符串）-> 该 rank 主线程的 {pid, wait, op, user_frame, world_size, master}"
                    "（无法导出调用栈时 wait 为 null；master 为 MASTER_ADDR:MASTER_PORT）"},
    "distinct_ops": {"type": "array",
                     "en": "Sorted collective ops the ranks' main threads wait in",
                     "zh": "各 rank 主线程所等待的不同集合通信操作，已排序"},
    "mismatched": {"type": "boolean",
                   "en": "Ranks' main threads wait in different collective ops, or some in a collective "
                         "and some not: the ranks took different code paths",
                   "zh": "各 rank 主线程等待的集合通信操作不同，或部分在集合通信中而部分不在："
                         "各 rank 走了不同的代码路径"},
    "odd_ranks": {"type": "array",
                  "en": "Ranks whose (wait, op) differs from the majority's (a tie goes to the group "
                        "holding the lowest rank)",
                  "zh": "(wait, op) 与多数 rank 不同的 rank（数量相同时以包含最小 rank 的一组为多数）"},
    "locked": {"type": "array",
               "en": "Processes whose main thread waits on a lock: {pid, ppid, role, rank, wait "
                     "(lock or extension-lock), op, frame (innermost frame), user_frame, wchan (the "
                     "kernel function it sleeps in, e.g. futex_wait_queue), extensions_dir (its "
                     "TORCH_EXTENSIONS_DIR, null when unset)}; a DataLoader worker here is the classic "
                     "lock inherited at fork",
               "zh": "主线程在等待锁的进程：{pid, ppid, role, rank, wait（lock 或 extension-lock）、op、"
                     "frame（最内层帧）、user_frame、wchan（它在内核中休眠所在的函数，如 "
                     "futex_wait_queue）、extensions_dir（其 TORCH_EXTENSIONS_DIR，未设置时为 null）}；"
                     "这里出现 DataLoader worker 即典型的 fork 时继承下来的锁"},
    "majority": {"type": "object",
                 "en": "{wait, op, count} shared by most ranks (null when no rank was dumped)",
                 "zh": "多数 rank 共有的 {wait, op, count}（没有导出任何 rank 时为 null）"},
}
DEFAULT_TIMEOUT = 20.0

COLLECTIVE_OPS = frozenset(stackframes.COLLECTIVE_OPS)
_STDLIB = re.compile(r"[/\\]lib[/\\]python\d+(\.\d+)?t?[/\\]")
_DENIED = re.compile(r"permission denied|operation not permitted|os error (1|13)\)", re.I)
_FRAMES_SHOWN = 8
_MAX_PROCESSES = 32
_PARALLEL = 8
_CMDLINE_MAX = 200
_NAME_MAX = 160


def run(params: dict[str, Any], ctx: CheckContext) -> dict[str, Any]:
    how, (selected, _unreadable, reason) = process._select(
        {"pid": params.get("pid"), "match": params.get("match"), "log": params.get("log")})
    result = _blank(how)
    entries = _entries(selected)
    py_spy = find_py_spy(str(params.get("py_spy") or "py-spy"), ctx.env, entries)
    result["py_spy"] = py_spy
    if py_spy is None:
        result.update(available=False, reason="py-spy not found (pip install py-spy, or give py_spy: "
                                              "PATH); looked on PATH and next to the Python interpreters")
        return result
    if not entries:
        result.update(reason=reason or "no process selected")
        return result
    native = process._flag(params.get("native"), default=False)
    _dump_all(py_spy, entries, native, ctx)
    result["found"] = True
    result["processes"] = entries
    result.update(compare_ranks(entries))
    result["locked"] = locked(entries)
    result.update(_availability(entries))
    return result


def _blank(how: str) -> dict[str, Any]:
    return {
        "available": True, "reason": None, "py_spy": None, "how": how, "found": False,
        "permission_denied": False, "processes": [], "ranks": {}, "distinct_ops": [],
        "mismatched": False, "odd_ranks": [], "majority": None, "locked": [],
    }


# -- selection ---------------------------------------------------------------------------------


def _entries(selected: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """One result entry per selected process, with its rank and role; ranks first, then by pid."""
    entries = []
    for pid, info in selected.items():
        env = info.get("env")
        if env is None:
            env = _environ(pid)
        entries.append({"pid": pid, "ppid": info["stat"]["ppid"], "rank": process.env_rank(env, "RANK"),
                        "role": "rank", "cmdline": _cmdline(pid), "state": info["stat"]["state"],
                        "world_size": process.env_rank(env, "WORLD_SIZE"), "master": _master(env),
                        "extensions_dir": env.get("TORCH_EXTENSIONS_DIR") or None})
    assign_roles(entries)
    order = {"rank": 0, "launcher": 1, "worker": 2}
    entries.sort(key=lambda e: (order[e["role"]], e["pid"]))
    return entries


def _master(env: dict[str, str]) -> str | None:
    """MASTER_ADDR:MASTER_PORT, where a rank looks for the rendezvous store."""
    addr, port = env.get("MASTER_ADDR"), env.get("MASTER_PORT")
    return f"{addr}:{port}" if addr and port else addr or None


def _environ(pid: int) -> dict[str, str]:
    try:
        return _procfs.environ(pid)
    except OSError:
        return {}


def _cmdline(pid: int) -> str:
    try:
        return " ".join(_procfs.cmdline(pid))[:_CMDLINE_MAX]
    except OSError:
        return ""


def assign_roles(entries: list[dict[str, Any]]) -> None:
    """Mark launchers (children carry other ranks) and workers (children with their parent's rank)."""
    by_pid = {e["pid"]: e for e in entries}
    children: dict[int, list[dict[str, Any]]] = {}
    for entry in entries:
        if entry["ppid"] in by_pid:
            children.setdefault(entry["ppid"], []).append(entry)
    for pid, kids in children.items():
        parent = by_pid[pid]
        kid_ranks = {k["rank"] for k in kids if k["rank"] is not None}
        if kid_ranks - {parent["rank"]}:
            parent["role"] = "launcher"
        else:
            for kid in kids:
                kid["role"] = "worker"


def find_py_spy(name: str, env: dict[str, str], entries: list[dict[str, Any]]) -> str | None:
    """A runnable py-spy: the path given, else on PATH, next to this Python or the jobs' Pythons."""
    if os.sep in name:
        return name if os.access(name, os.X_OK) else None
    found = shutil.which(name, path=env.get("PATH"))
    if found:
        return found
    dirs = [os.path.dirname(sys.executable)] if sys.executable else []
    for entry in entries:
        argv0 = entry["cmdline"].split(" ", 1)[0]
        if os.path.isabs(argv0):
            dirs.append(os.path.dirname(argv0))
    for folder in dirs:
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


# -- dumping -----------------------------------------------------------------------------------


def _dump_all(py_spy: str, entries: list[dict[str, Any]], native: bool, ctx: CheckContext) -> None:
    todo = []
    for index, entry in enumerate(entries):
        entry.update(threads=[], main_wait=None, main_op=None, main_user_frame=None, main_frame=None,
                     main_wchan=None, error=None, permission_denied=False)
        if entry.pop("state") == "Z":
            entry["error"] = "zombie: exited but not reaped by its parent"
        elif index >= _MAX_PROCESSES:
            entry["error"] = f"not dumped: more than {_MAX_PROCESSES} processes selected"
        else:
            todo.append(entry)
    if not todo:
        return
    with ThreadPoolExecutor(max_workers=min(_PARALLEL, len(todo))) as pool:
        outcomes = list(pool.map(lambda e: dump(py_spy, e["pid"], native, ctx), todo))
    for index, entry in enumerate(todo):
        threads, error, denied = outcomes[index]
        entry.update(error=error, permission_denied=denied)
        if threads is not None:
            _attach_threads(entry, threads)


def dump(py_spy: str, pid: int, native: bool, ctx: CheckContext) -> tuple[list | None, str | None, bool]:
    """(py-spy's thread list or None, error or None, permission denied) for one process. A dump
    that failed for another reason than permission or time is tried once more: py-spy reads the
    interpreter's state from outside while the process runs, and a loaded machine can catch it
    between two consistent states."""
    threads, error, denied, worth_retrying = _dump_once(py_spy, pid, native, ctx)
    if worth_retrying:
        threads, error, denied, _ = _dump_once(py_spy, pid, native, ctx)
    return threads, error, denied


def _dump_once(py_spy: str, pid: int, native: bool,
               ctx: CheckContext) -> tuple[list | None, str | None, bool, bool]:
    """dump()'s answer, and whether trying again may change it."""
    argv = [py_spy, "dump", "--json", "--pid", str(pid)] + (["--native"] if native else [])
    outcome = ctx.run_command(argv)
    if outcome.not_found:
        return None, f"cannot run {py_spy}: {outcome.stderr}", False, False
    if outcome.timed_out:
        return None, f"py-spy dump did not finish within {outcome.duration_s:.1f}s (killed)", False, False
    threads = _parse_json(outcome.stdout) if outcome.returncode == 0 else None
    if threads is not None:
        return threads, None, False, False
    message = pyspy_error(outcome.stderr) or f"py-spy exited with status {outcome.returncode}"
    denied = is_permission_error(outcome.stderr)
    return None, message, denied, not denied


def _parse_json(text: str) -> list | None:
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, list) else None


def pyspy_error(stderr: str) -> str:
    """py-spy's error message without the Rust backtrace: its first lines, joined."""
    lines = []
    for line in stderr.splitlines():
        if line.strip().startswith("Stack backtrace:"):
            break
        if line.strip():
            lines.append(line.strip())
    return "; ".join(lines[:3])[:500]


def is_permission_error(stderr: str) -> bool:
    return bool(_DENIED.search(stderr))


def _attach_threads(entry: dict[str, Any], raw_threads: list) -> None:
    raw = [thread for thread in raw_threads if isinstance(thread, dict)]
    threads = [describe_thread(thread, wchan(entry["pid"], thread.get("os_thread_id"))) for thread in raw]
    entry["threads"] = threads
    main = _main_thread(raw, threads, entry["pid"])
    if main is not None:
        entry.update(main_wait=main["waits"], main_op=main["op"], main_user_frame=main["user_frame"],
                     main_frame=main["innermost"], main_wchan=main["wchan"])


def _main_thread(raw: list, threads: list[dict[str, Any]], pid: int) -> dict[str, Any] | None:
    for rule in (lambda r: r.get("os_thread_id") == pid, lambda r: r.get("thread_name") == "MainThread"):
        for index, raw_thread in enumerate(raw):
            if rule(raw_thread):
                return threads[index]
    return threads[0] if threads else None


# -- classification ----------------------------------------------------------------------------


def wchan(pid: int, tid: Any) -> str | None:
    """The kernel function thread `tid` of `pid` sleeps in (/proc/PID/task/TID/wchan); None when
    unknown (no thread id, gone, or hidden: the kernel shows "0" to those who may not see it)."""
    if not isinstance(tid, int) or isinstance(tid, bool) or tid <= 0:
        return None
    text = (_procfs.read_text(f"/proc/{pid}/task/{tid}/wchan") or "").strip()
    return None if text in ("", "0") else text


def describe_thread(raw: dict[str, Any], kernel_wait: str | None = None) -> dict[str, Any]:
    """One thread of a py-spy JSON dump: where it waits, and its frames as text. `kernel_wait` is
    the thread's wchan: an idle thread in a futex wait with no known wait on its stack waits on a
    lock (threading.Lock.acquire is C, so no Python frame names it)."""
    frames = [f for f in raw.get("frames") or [] if isinstance(f, dict)]
    waits, op = classify(frames)
    idle = not raw.get("active", True)
    if waits == "running" and idle and (kernel_wait or "").startswith("futex") and frames:
        waits, op = "lock", _path_func(frames[0])[1]
    if waits == "running" and idle:
        waits = "idle"
    user = next((f for f in frames if is_user_frame(f)), None)
    return {
        "thread_id": raw.get("thread_id"),
        "name": raw.get("thread_name"),
        "idle": idle,
        "waits": waits,
        "op": op,
        "innermost": frame_text(frames[0]) if frames else None,
        "user_frame": frame_text(user) if user is not None else None,
        "frames": [frame_text(f) for f in frames[:_FRAMES_SHOWN]],
        "wchan": kernel_wait,
    }


classify = stackframes.classify  # the rules are shared with triage (checks/facts/stackframes.py)
_path_func = stackframes.path_func
_is_native = stackframes.is_native


def is_user_frame(frame: dict[str, Any]) -> bool:
    """A Python frame outside site-packages/dist-packages and the standard library."""
    path = str(frame.get("filename") or "")
    if not path or _is_native(frame) or path.startswith("<frozen"):
        return False
    if "site-packages" in path or "dist-packages" in path:
        return False
    return not _STDLIB.search(path)


def frame_text(frame: dict[str, Any]) -> str:
    name = str(frame.get("name") or "?")
    if len(name) > _NAME_MAX:  # C++ template names run to kilobytes
        name = name[:_NAME_MAX] + "..."
    path = frame.get("filename") or frame.get("short_filename") or "?"
    if _is_native(frame) and not frame.get("line"):
        return f"{name} ({frame.get('short_filename') or os.path.basename(str(path))})"
    return f"{path}:{frame.get('line') or 0} {name}"


# -- comparing the ranks -----------------------------------------------------------------------


def compare_ranks(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """ranks, distinct_ops, mismatched, odd_ranks and majority from the rank processes' main threads."""
    ranks: dict[str, dict[str, Any]] = {}
    for entry in entries:
        key = str(entry["rank"])
        if entry["role"] != "rank" or entry["rank"] is None or key in ranks:
            continue
        ranks[key] = {"pid": entry["pid"], "wait": entry.get("main_wait"), "op": entry.get("main_op"),
                      "user_frame": entry.get("main_user_frame"), "world_size": entry.get("world_size"),
                      "master": entry.get("master")}
    seen = {int(r): (v["wait"], v["op"]) for r, v in ranks.items() if v["wait"] is not None}
    in_collective = [key for key in seen.values() if key[0] == "collective"]
    ops = sorted({op for _, op in in_collective if op})
    mismatched = len(seen) >= 2 and bool(in_collective) and (
        len(ops) > 1 or len(in_collective) < len(seen))
    majority, odd = _majority(seen)
    return {"ranks": ranks, "distinct_ops": ops, "mismatched": mismatched, "odd_ranks": odd,
            "majority": majority}


def locked(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The processes whose main thread waits on a lock (a DataLoader worker that inherited a held
    lock at fork, a rank waiting on the torch extensions lock), with where and in which kernel wait."""
    found = []
    for entry in entries:
        if entry.get("main_wait") not in ("lock", "extension-lock"):
            continue
        found.append({"pid": entry["pid"], "ppid": entry.get("ppid"), "role": entry.get("role"),
                      "rank": entry.get("rank"), "wait": entry["main_wait"], "op": entry.get("main_op"),
                      "frame": entry.get("main_frame"), "user_frame": entry.get("main_user_frame"),
                      "wchan": entry.get("main_wchan"), "extensions_dir": entry.get("extensions_dir")})
    return found


def _majority(seen: dict[int, tuple[str, str | None]]) -> tuple[dict[str, Any] | None, list[int]]:
    if not seen:
        return None, []
    groups: dict[tuple[str, str | None], list[int]] = {}
    for rank in sorted(seen):
        groups.setdefault(seen[rank], []).append(rank)
    key = max(groups, key=lambda k: (len(groups[k]), -min(groups[k])))
    odd = sorted(r for r, k in seen.items() if k != key)
    return {"wait": key[0], "op": key[1], "count": len(groups[key])}, odd


def _availability(entries: list[dict[str, Any]]) -> dict[str, Any]:
    denied = [e["pid"] for e in entries if e.pop("permission_denied", False)]
    failed = [e for e in entries if e["error"]]
    dumped = len(entries) - len(failed)
    fields: dict[str, Any] = {"permission_denied": bool(denied), "available": dumped > 0}
    if denied:
        fields["reason"] = permission_reason(denied)
    elif failed:
        first = failed[0]
        fields["reason"] = (f"{len(failed)} of {len(entries)} processes not dumped; pid {first['pid']}: "
                            f"{first['error']}")
    return fields


def permission_reason(pids: list[int]) -> str:
    scope = (_procfs.read_text("/proc/sys/kernel/yama/ptrace_scope") or "").strip()
    scope_text = f" (kernel.yama.ptrace_scope={scope})" if scope else ""
    shown = ", ".join(str(p) for p in pids[:8])
    return (f"permission denied: py-spy may not attach to pid {shown}{scope_text}. Run the probe as "
            "root or with CAP_SYS_PTRACE (in a container: docker run --cap-add SYS_PTRACE), or allow "
            "ptrace of your own processes with `sysctl kernel.yama.ptrace_scope=0`")
