"""Lines that read as errors, kept while a log is scanned: what triage falls back on when
no signature knows the error (fallback.py), and how it tells "no error at all" apart.

An exception line is a traceback's last line (`RuntimeError: ...`, `torch.OutOfMemoryError:
...`, `ray.exceptions.RayTaskError(...)`); an error line holds `ERROR`, `FATAL`, `Error:`,
`error:` or 错误/失败/异常/报错/崩溃, or says a process died: a glog `E0213 12:07:20` line or
Ray's log at severity E or F, the elastic agent's `failed (exitcode: 1)` and its summary's
`exitcode  : 1 (pid: 39887)`, a job or a command that `failed with exit code 1`, `FAILED`, a
fatal signal (`*** SIGTERM received`, `Segmentation fault`, `core dumped`), a launcher killing
its children (`Killing subprocess`); or it is a library's error code (`NIXL_ERR_BACKEND`) or a
line that begins `Failed to <verb>`.
A traceback's first line (`Traceback (most recent call last):`) or one of its frames counts
when nothing better does: an excerpt cut before the exception still shows an error. Lines that only talk about
errors (`0 errors`, `error_rate`) are not errors.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from typing import Any

KEEP = 20  # last lines kept of each kind
# A cheap test on a lowercased line before the regexes run: most lines of a log have none.
KEYWORDS = ("error", "exception", "fatal", "critical", "fault", "failure", "interrupt",
            "failed", "traceback", "killing subprocess", "sigterm", "sigabrt", "sigsegv", "sigbus",
            "core dumped", "e0000 00:", '", line 0', "exitcode", "exited with", "terminated with", "_err_",
            ".cc:",
            "错误", "失败", "异常", "报错", "崩溃")
EXCEPTION_LINE = re.compile(
    r"^\s*(?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Interrupt|Failure|Fault)\b(?:[:(]|$)")
ERROR_LINE = re.compile(r"\b(?:ERROR|FATAL|CRITICAL|Error:|Fatal error|error:)|错误|失败|异常|报错|崩溃"
                    r"|^[EF]\d{4} \d\d:\d\d:\d\d|\bfailed \(exitcode: -?\d+\)|\bFAILED\b"
                    r"|\*\*\* SIG[A-Z]+ received|Segmentation fault|core dumped|\bKilling subprocess \d+"
                    # torchrun's failure summary; a job, step or command that ended with a non-zero code
                    r"|\bexitcode\s*:\s*-?[1-9]\d* \(pid: \d+\)"
                    r"|\b(?:failed|exited|terminated) with (?:exit )?(?:code|status):? -?[1-9]"
                    r"|\b[A-Z][A-Z0-9]+_ERR_[A-Z0-9_]+\b|^\s*Failed to [a-z]"
                    # Ray's C++ log at severity E or F (`[2025-05-12 21:22:19,118 E 47346 47378] x.cc:116:`)
                    r"|(?:^|,\d{3} )[EF] \d+ \d+\] \S+\.cc:\d+:")
# A traceback's first line, or one of its frames (`File "...", line 12, in f`; faulthandler's
# `line 12 in f`, without the comma, is a stack dump, not an error).
FRAME = re.compile(r"\bFile \"([^\"]+)\", line \d+, in (\S+)")  # its file and function
TRACEBACK = re.compile(r"\bTraceback \(most recent call last\):|" + FRAME.pattern)
# Where installed packages live: what follows is the module's path (the standard library's
# frames, runpy and threading, say nothing about the failure).
LIBRARY_ROOTS = ("site-packages/", "dist-packages/")
# Functions every program has: a frame in one says nothing about what failed.
EVERY_PROGRAM = frozenset({"main", "module", "wrapper", "call", "call_impl", "wrapped_call_impl", "inner",
                            "forward", "run", "train", "decorate_context", "f", "fn", "func", "launch",
                            "run_code", "run_module_as_main", "init", "invoke", "handler"})
NOT_ERRORS = re.compile(r"\b(?:0 errors?|no errors?|error_rate|ignore_errors|on_error)\b", re.IGNORECASE)


@dataclass
class ErrorLines:
    """The last exception lines and the last other error lines seen, each (line number, hit)."""

    exceptions: deque[Any] = field(default_factory=lambda: deque(maxlen=KEEP))
    errors: deque[Any] = field(default_factory=lambda: deque(maxlen=KEEP))
    tracebacks: deque[Any] = field(default_factory=lambda: deque(maxlen=KEEP))  # headers and frames

    def see(self, text: str, hit: Any) -> None:
        """Keep `hit` (a LineHit) when its normalised `text` reads as an error."""
        if NOT_ERRORS.search(text):
            return
        if EXCEPTION_LINE.match(text):
            self.exceptions.append(hit)
        elif ERROR_LINE.search(text):
            self.errors.append(hit)
        elif TRACEBACK.search(text):
            self.tracebacks.append(hit)

    def any(self) -> bool:
        return bool(self.exceptions or self.errors or self.tracebacks)

    def query_line(self) -> Any:
        """The line to compare: the last exception line, else the last error line, else the
        last traceback line (its first line or a frame)."""
        if self.exceptions:
            return self.exceptions[-1]
        if self.errors:
            return self.errors[-1]
        return self.tracebacks[-1] if self.tracebacks else None

    def query_text(self) -> str:
        """What to compare for `query_line`: the exception or error line itself; for a traceback
        cut before its exception, the library frames it kept (`torch/distributed/elastic/
        rendezvous/dynamic_rendezvous.py next_rendezvous`): where the program was says what it
        did; a frame of the user's own script (its path, `main`) resembles nothing."""
        if self.exceptions or self.errors:
            return str(self.query_line().text)
        return " ".join(library_frame(hit.text) for hit in self.tracebacks).strip()


def library_frame(text: str) -> str:
    """A frame as words: an installed package's module path and function; an import's machinery
    as `import`; elsewhere (a source checkout, the user's script) the function's name, unless it
    is one every program has (`main`, `forward`); "" for a traceback's first line."""
    m = FRAME.search(text)
    if not m:
        return ""
    path, func = m.group(1).replace("\\", "/"), m.group(2).strip("<>")
    if path.startswith("<frozen importlib"):
        return "import"
    for marker in LIBRARY_ROOTS:
        at = path.rfind(marker)
        if at >= 0:
            module = path[at + len(marker):].rsplit(".", 1)[0]
            return f"{module.replace('/', ' ').replace('_', ' ')} {func.replace('_', ' ')}"
    return "" if func.strip("_") in EVERY_PROGRAM else func.replace("_", " ")


def may_hold_error(lowered: str) -> bool:
    """Whether lowercased text may hold an error line at all."""
    return any(keyword in lowered for keyword in KEYWORDS)
