"""Stack dumps as evidence: a pasted py-spy, faulthandler or gdb dump, classified like the check.

A dump of a hung job has no error line, yet it says where each process waits. Its threads are
rebuilt from the text (py-spy's `Thread N (idle): "MainThread"` and `func (file.py:12)`,
faulthandler's `Thread 0x... (most recent call first):` and `File "f.py", line 12 in func`,
gdb's `Thread 1 (Thread 0x... (LWP n))` and `#3 0x... in func () from lib.so`) and each
process's main thread is classified by checks/facts/stackframes.py, the rules the `stack` check
applies on a live node. The processes are then compared as the stack-groups analysis does: main
threads in different collectives took different code paths.

Each reading names its conclusion (WAIT_CONCLUSIONS) and carries the frames it rests on. The
rules are data; the site's triage page applies the same ones (site/triage_export.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from runbook.checks.facts import stackframes
from runbook.triage.sources import Source, line_rank

# A thread's header, by dump format. py-spy: `Thread 4085279 (idle): "MainThread"`;
# faulthandler: `Current thread 0x00007f... (most recent call first):`; gdb: `Thread 1 (Thread
# 0x7f... (LWP 1234)):`. A process's header (py-spy): `Process 4085279: VLLM::EngineCore`.
PATTERNS = {
    "process": r"^\s*Process (\d+): (.*)$",
    "pyspy_thread": r"^\s*Thread (0x[0-9A-Fa-f]+|\d+) \((active|idle)(?:\+gil)?\)(?:: \"([^\"]*)\")?",
    "fault_thread": r"^\s*(Current thread|Thread) (0x[0-9A-Fa-f]+) \(most recent call first\):",
    "gdb_thread": r"^\s*Thread (\d+) \(Thread 0x[0-9A-Fa-f]+ \(LWP (\d+)\)\)",
    # frames: py-spy `func (path.py:12)` or native `func (libfoo.so)`; faulthandler; gdb
    "pyspy_frame": r"^\s*(\S.*?) \(([^()\s]+?)(?::(\d+))?\)\s*$",
    "fault_frame": r"^\s*File \"([^\"]+)\", line (\d+) in (\S+)\s*$",
    "gdb_frame": r"^\s*#\d+\s+(?:0x[0-9A-Fa-f]+ in )?(.+?)(?: \(\))?(?: (?:from|at) (\S+))?\s*$",
}
NEEDLES = ("thread ", "process ")  # lowercase: every header holds one; a block without them starts no dump
# ... or frames pasted without their thread's header: a run of HEADLESS_RUN frame lines makes one
FRAME_NEEDLES = (".py", ".so", "line ", "#")  # what _may_be_frame needs, lowercase
HEADLESS_RUN = 3
IDLE_ONLY = ("backward",)  # waits that say "waiting" only when the thread is not running
WAIT_CONCLUSIONS = {
    "collective": "training-hang:collective-wait",
    # the host waits for the GPU: a kernel that never ends, most often NCCL's waiting for a peer (the
    # live walk's stuck-in-gpu-kernel; its GPU utilisation confirms what a paste cannot show)
    "cuda-sync": "training-hang:stuck-in-gpu-kernel",
    "gpu-kernel": "training-hang:stuck-in-gpu-kernel",  # a launch that blocks: a kernel never ends
    "rendezvous": "training-hang:waiting-in-rendezvous",
    "backward": "training-hang:collective-wait",  # idle in autograd: a DDP/ZeRO collective in a hook
    "dataloader": "training-hang:dataloader-worker-stuck",
    "ray": "ray-hang:collect-never-returns",
    "engine-workers": "ray-hang:collect-never-returns",  # the driver waits on workers, Ray's or not
    "extension-lock": "extension-errors:stale-extension-lock",
    "lock-in-worker": "training-hang:dataloader-fork-deadlock",  # a DataLoader worker on a lock
}
MISMATCH = "training-hang:collective-mismatch"
GUESS = "training-hang:collective-wait"  # what a dump that names no wait most often is
# a DataLoader worker's own loop: a lock here is the lock inherited at fork
WORKER_FRAME = ("torch/utils/data/_utils/worker.py", "_worker_loop")
TEXTS: dict[str, dict[str, str]] = {
    "stack-unnamed": {
        "en": "the dump ({count} processes) shows no wait the stack check knows, and no thread is seen "
              "running: a guess, a hung rank most often waits on its peers; dump every rank to see which",
        "zh": "调用栈（{count} 个进程）中没有栈检查认得的等待，也看不到正在运行的线程：推测而已，卡住的 rank "
              "多半在等其他 rank；请导出每个 rank 的调用栈来确认"},
    "stack-mismatch": {
        "en": "the dumped processes wait in different collectives: {groups}",
        "zh": "导出的各进程等在不同的集合通信中：{groups}"},
    "stack-wait": {
        "en": "{count} of {total} dumped processes ({who}), thread {thread}: {waits}{op} at {frame}",
        "zh": "导出的 {total} 个进程中有 {count} 个（{who}），线程 {thread}：{waits}{op}，位置 {frame}"},
}
ADDRESS = re.compile(r"^(?:0x[0-9A-Fa-f]+|\?\?)$")  # a frame py-spy or gdb could not name
MAX_THREADS = 512  # per log: a dump of every thread of 64 ranks fits
MAX_FRAMES = 64  # per thread, innermost first
COMPILED = {name: re.compile(pattern) for name, pattern in PATTERNS.items()}


@dataclass
class _Thread:
    name: str
    ident: str
    main_hint: bool  # py-spy's MainThread or thread id == pid; faulthandler's current thread; gdb's 1
    frames: list[dict[str, Any]] = field(default_factory=list)
    where: str = ""
    idle: bool | None = None  # py-spy says (idle) or (active); the other formats do not say


@dataclass
class _Process:
    who: str
    pid: str | None = None  # py-spy's `Process N:` header
    threads: list[_Thread] = field(default_factory=list)
    last_is_main: bool = False  # faulthandler lists the main thread last


@dataclass
class Stacks:
    """The processes and threads of every dump in the logs, fed block by block."""

    processes: dict[str, _Process] = field(default_factory=dict)
    threads: int = 0
    _thread: _Thread | None = None
    _process: _Process | None = None
    _format: str = ""
    _loose: list[tuple[dict[str, Any], str, str]] = field(default_factory=list)  # frames with no header

    def start(self, source: Source) -> None:
        self._thread = self._process = None
        self._loose = []

    def block(self, numbers: list[int], raws: list[str], lines: list[str], lowered: str,
              source: Source) -> None:
        if (self._thread is None and not self._loose and not any(n in lowered for n in NEEDLES)
                and not any(n in lowered for n in FRAME_NEEDLES)):
            return
        for number, raw, line in zip(numbers, raws, lines, strict=True):
            self.see(raw, line, source, number)

    def see(self, raw: str, text: str, source: Source, line_no: int) -> None:
        if self._header(raw, text, source, line_no):
            self._loose = []
            return
        frame = self._frame(text) if _may_be_frame(text) else None
        if self._thread is None:
            self._headless(frame, raw, source, line_no, text)
            return
        if frame is None:
            if text.strip():
                self._thread = None  # the dump ended
            return
        if len(self._thread.frames) < MAX_FRAMES:
            self._thread.frames.append(frame)

    def _headless(self, frame: dict[str, Any] | None, raw: str, source: Source, line_no: int,
                  text: str) -> None:
        """Frames pasted without a header: HEADLESS_RUN of them in a row become a thread of their own."""
        if frame is None:
            if text.strip():
                self._loose = []
            return
        self._loose.append((frame, raw, f"{source.path}:{line_no}"))
        if len(self._loose) < HEADLESS_RUN or self.threads >= MAX_THREADS:
            return
        self.threads += 1
        _, first_raw, where = self._loose[0]
        self._process = self._process_for(source, first_raw, "")
        self._format = "headless"
        self._thread = _Thread("", "", True, [f for f, _, _ in self._loose], where=where)
        self._process.threads.append(self._thread)
        self._loose = []

    def _header(self, raw: str, text: str, source: Source, line_no: int) -> bool:
        if "hread " not in text and "Process " not in text:
            return False
        found = COMPILED["process"].match(text)
        if found:
            self._thread = None
            self._process = self._process_for(source, raw, f"pid {found.group(1)}")
            self._process.pid = found.group(1)
            self._format = ""  # its threads follow
            return True
        for fmt in ("pyspy_thread", "fault_thread", "gdb_thread"):
            found = COMPILED[fmt].match(text)
            if found:
                break
        else:
            return False
        if self.threads >= MAX_THREADS:
            self._thread = None
            return True
        self.threads += 1
        idle: bool | None = None
        if fmt == "pyspy_thread":
            pid = self._process.pid if self._process else None
            name = found.group(3) or ""
            hint = name == "MainThread" or (pid is not None and found.group(1) == pid)
            ident = found.group(1)
            idle = found.group(2) == "idle"
        elif fmt == "fault_thread":
            name, ident, hint = found.group(1), found.group(2), found.group(1) == "Current thread"
        else:
            name, ident, hint = f"Thread {found.group(1)}", found.group(2), found.group(1) == "1"
        if (self._process is None or self._format not in ("", fmt) or self._format == "headless"
                or (fmt != "pyspy_thread" and self._repeats(ident))
                or (fmt == "pyspy_thread" and name == "MainThread" and self._has_main())):
            self._process = self._process_for(source, raw, "")
        self._format = fmt
        self._process.last_is_main = fmt == "fault_thread"
        self._thread = _Thread(name, ident, hint, where=f"{source.path}:{line_no}", idle=idle)
        self._process.threads.append(self._thread)
        return True

    def _has_main(self) -> bool:
        """A process has one MainThread: py-spy's second one starts another process's dump (dumps
        pasted one after the other, or grouped as `5 processes in:` without py-spy's own header)."""
        return self._process is not None and any(t.name == "MainThread" for t in self._process.threads)

    def _repeats(self, ident: str) -> bool:
        """A thread id seen again in the same process starts another process's dump."""
        return self._process is not None and any(t.ident == ident for t in self._process.threads)

    def _process_for(self, source: Source, raw: str, pid_label: str) -> _Process:
        rank = line_rank(raw)
        rank = rank if rank is not None else source.rank
        who = f"rank {rank}" if rank is not None else (pid_label or f"process {len(self.processes) + 1}")
        if who in self.processes and self.processes[who].threads:
            who = f"{who} ({source.path}:{len(self.processes) + 1})"
        self.processes[who] = _Process(who)
        return self.processes[who]

    @staticmethod
    def _frame(text: str) -> dict[str, Any] | None:
        found = COMPILED["fault_frame"].match(text)
        if found:
            return {"filename": found.group(1), "line": int(found.group(2)), "name": found.group(3)}
        found = COMPILED["pyspy_frame"].match(text)
        if found:
            path = found.group(2)
            frame: dict[str, Any] = {"filename": path, "name": found.group(1)}
            if found.group(3):
                frame["line"] = int(found.group(3))
            elif not path.endswith(".py"):
                frame["module"] = path
            return frame
        found = COMPILED["gdb_frame"].match(text) if text.lstrip().startswith("#") else None
        if found:
            return {"filename": found.group(2) or "", "name": found.group(1), "module": found.group(2) or "?"}
        return None

    def readings(self) -> list[dict[str, Any]]:
        """What the dumps say: the processes' main threads compared, most telling first."""
        mains = {who: main for who, p in self.processes.items() if (main := _telling(p)) is not None}
        if not mains:
            dumped = sum(1 for p in self.processes.values() if any(t.frames for t in p.threads))
            return [_unnamed(dumped)] if dumped else []
        waits = {who: _classify(thread) for who, thread in mains.items()}
        total = len(waits)
        out: list[dict[str, Any]] = []
        ops = sorted({op or "" for w, op in waits.values() if w == "collective"})
        if len(ops) > 1:
            groups = "; ".join(f"{op} on {_shown(w for w, k in waits.items() if k == ('collective', op))}"
                               for op in ops)
            first = min((mains[w].where for w, k in waits.items() if k[0] == "collective"), key=_place)
            out.append({"reading": "stack-mismatch", "conclusion": MISMATCH, "first": first,
                        "facts": {"groups": groups}})
        by_wait: dict[tuple[str, str | None], list[str]] = {}
        for who, key in waits.items():
            by_wait.setdefault(key, []).append(who)
        for (wait, op), whos in sorted(by_wait.items(), key=lambda kv: (-len(kv[1]), kv[0][0])):
            thread = mains[whos[0]]
            kind = "lock-in-worker" if wait == "lock" and _in_worker(thread) else wait
            if kind in IDLE_ONLY and thread.idle is False:
                kind = "running"
            # ranks in different collectives: no group of them "all waits in the same one"
            named_by = None if wait == "collective" and len(ops) > 1 else WAIT_CONCLUSIONS.get(kind)
            out.append({"reading": "stack-wait", "conclusion": named_by,
                        "first": thread.where,
                        "facts": {"waits": wait, "op": op or "", "count": len(whos), "total": total,
                                  "thread": thread.name,
                                  "who": _shown(whos), "frame": _frame_text(thread)}})
        named = [r for r in out if r["conclusion"]]
        guess = [_unnamed(total)] if not named and any(t.idle is not False for t in mains.values()) else []
        return named + [r for r in out if not r["conclusion"]] + guess


def _unnamed(count: int) -> dict[str, Any]:
    """A dump that names no wait the rules know, and no thread is seen running: a guess, said as
    one (a hung job's rank most often waits on a peer, in C++ or a queue no frame names)."""
    return {"reading": "stack-unnamed", "conclusion": GUESS, "guess": True, "first": None,
            "facts": {"count": count}}


def _may_be_frame(text: str) -> bool:
    """A cheap test before the frame regexes run on a line."""
    if "(" in text and (".py" in text or ".so" in text):
        return True
    return "line " in text or text.lstrip().startswith("#")


def _main(process: _Process) -> _Thread | None:
    """The process's main thread: py-spy names it; otherwise the thread that `threading` did not
    start (faulthandler's current thread is the one that dumped, often a watchdog's)."""
    threads = [t for t in process.threads if t.frames]
    if not threads:
        return None
    named = next((t for t in threads if t.main_hint and t.name == "MainThread"), None)
    if named is not None:
        return named
    not_started = [t for t in threads if not _started_by_threading(t)]
    if not not_started and len(process.threads) > 1:
        return None  # only threads that `threading` started were dumped: the main thread's is cut
    not_started = not_started or threads
    hinted = next((t for t in not_started if t.main_hint), None)
    if hinted is not None:
        return hinted
    return not_started[-1] if process.last_is_main else not_started[0]


def _started_by_threading(thread: _Thread) -> bool:
    path, func = stackframes.path_func(thread.frames[-1])
    return path.endswith("threading.py") and func.startswith("_bootstrap")


def _telling(process: _Process) -> _Thread | None:
    """The thread that says where the process waits: its main thread, unless that one names no
    wait (Ray's and vLLM's workers run the job in a thread while the main thread idles in an event
    loop); then the first other thread that does."""
    main = _main(process)
    if main is not None and _names_a_wait(main):
        return main
    return next((t for t in process.threads if t.frames and t is not main and _names_a_wait(t)), main)


def _names_a_wait(thread: _Thread) -> bool:
    wait = _classify(thread)[0]
    return wait in WAIT_CONCLUSIONS and not (wait in IDLE_ONLY and thread.idle is False)


def _classify(thread: _Thread) -> tuple[str, str | None]:
    return stackframes.classify(thread.frames)


def _in_worker(thread: _Thread) -> bool:
    return any(path.endswith(WORKER_FRAME[0]) and func == WORKER_FRAME[1]
               for path, func in map(stackframes.path_func, thread.frames))


def _frame_text(thread: _Thread) -> str:
    """The innermost frame with a name: a native dump's first frames are often bare addresses."""
    frame = next((f for f in thread.frames if not ADDRESS.match(str(f.get("name")))), thread.frames[0])
    line = f":{frame['line']}" if frame.get("line") else ""
    return f"{frame.get('name')} ({frame.get('filename')}{line})"


def _shown(whos: Any, limit: int = 6) -> str:
    names = list(whos)
    text = ", ".join(names[:limit])
    return text + (f" (+{len(names) - limit})" if len(names) > limit else "")


def _place(where: str) -> tuple[str, int]:
    path, _, line = where.rpartition(":")
    return path, int(line) if line.isdigit() else 0


def describe_reading(reading: dict[str, Any], lang: str = "en") -> str:
    facts = dict(reading["facts"])
    if "op" in facts:  # "collective all_reduce", "running"
        facts["op"] = f" {facts['op']}" if facts["op"] else ""
    return TEXTS[reading["reading"]][lang].format(**facts)
