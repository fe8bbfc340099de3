"""Reading the kernel log (dmesg, else journalctl -k) and dating its lines.

Standard library only, like every check module. Used by `gpu` (Xid events) and
`host` (OOM kills). Reading the kernel log often needs privileges
(kernel.dmesg_restrict=1 inside containers): a refusal is described, never raised.
"""

from __future__ import annotations

import datetime
import re
import time
from dataclasses import dataclass, field

from runbook.checks import _procfs
from runbook.checks.base import CheckContext, CommandOutcome

DMESG = ["dmesg", "-T"]
# -n: the newest lines when the journal holds more than the ring buffer ever could.
JOURNALCTL = ["journalctl", "-k", "-b", "--no-pager", "-o", "short-iso", "-n", "50000"]
_MAX_OUTPUT = 32_000_000  # the kernel ring buffer is at most 32 MiB

# [Sun Nov 22 04:07:49 2026] message        (dmesg -T, C locale)
_DMESG_T = re.compile(r"^\[([A-Z][a-z]{2} [A-Z][a-z]{2} +\d{1,2} \d{2}:\d{2}:\d{2} \d{4})\] ?(.*)$")
# [ 1234.567890] message                    (plain dmesg: seconds since boot)
_DMESG_RAW = re.compile(r"^\[\s*(\d+\.\d+)\] ?(.*)$")
# 2026-11-22T04:07:49+0000 host kernel: message   (journalctl -o short-iso)
_ISO = re.compile(
    r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:[.,]\d+)?(Z|[+-]\d{2}:?\d{2})? \S+ kernel: ?(.*)$"
)


@dataclass
class KernelLog:
    """The kernel log's lines, or why they could not be read."""

    lines: list[str] = field(default_factory=list)
    source: str | None = None  # "dmesg" or "journalctl"
    readable: bool = False
    reason: str | None = None
    timed_out: bool = False


def read_kernel_log(ctx: CheckContext, timeout: float | None = None) -> KernelLog:
    """`dmesg -T`, or `journalctl -k -b` when dmesg is refused; each under the timeout."""
    # The C locale keeps dmesg's weekday and month names parseable.
    c_ctx = CheckContext(deadline=ctx.deadline, env={**ctx.env, "LC_ALL": "C", "LANG": "C"})
    problems: list[str] = []
    timed_out = False
    for name, argv in (("dmesg", DMESG), ("journalctl", JOURNALCTL)):
        limit = c_ctx.remaining() if timeout is None else min(timeout, c_ctx.remaining())
        outcome = c_ctx.run_command(argv, timeout=limit, max_output=_MAX_OUTPUT)
        lines = _usable_lines(outcome)
        if lines:
            return KernelLog(lines, name, True, None)
        timed_out = timed_out or outcome.timed_out
        problems.append(f"{name}: {_problem(outcome)}")
    return KernelLog([], None, False, "; ".join(problems), timed_out)


def _usable_lines(outcome: CommandOutcome) -> list[str]:
    if outcome.timed_out or outcome.not_found or outcome.returncode != 0:
        return []
    lines = [line for line in outcome.stdout.splitlines() if line.strip()]
    # journalctl without a journal prints "-- No entries --" and exits 0.
    return [line for line in lines if not line.startswith("-- ")]


def _problem(outcome: CommandOutcome) -> str:
    if outcome.not_found:
        return "not installed"
    if outcome.timed_out:
        return f"did not answer within {outcome.duration_s:.1f}s (killed)"
    text = (outcome.stderr.strip() or outcome.stdout.strip() or f"exit {outcome.returncode}")
    if outcome.returncode == 0:
        return f"no kernel messages ({text.splitlines()[0][:200]})"
    return text.splitlines()[0][:200]


def boot_time() -> float:
    """Seconds since the epoch at which this node booted."""
    return time.time() - _procfs.uptime()


def split_line(line: str, booted: float | None = None) -> tuple[float | None, str]:
    """(epoch seconds or None, message) of a dmesg -T, plain dmesg or journalctl line."""
    m = _DMESG_T.match(line)
    if m:
        try:
            return time.mktime(time.strptime(m.group(1), "%a %b %d %H:%M:%S %Y")), m.group(2)
        except (ValueError, OverflowError):
            return None, m.group(2)
    m = _ISO.match(line)
    if m:
        return _iso_epoch(m.group(1), m.group(2)), m.group(3)
    m = _DMESG_RAW.match(line)
    if m:
        start = boot_time() if booted is None else booted
        return start + float(m.group(1)), m.group(2)
    return None, line


def _iso_epoch(stamp: str, zone: str | None) -> float | None:
    try:
        if not zone:
            return time.mktime(time.strptime(stamp, "%Y-%m-%dT%H:%M:%S"))
        zone = "+0000" if zone == "Z" else zone.replace(":", "")
        return datetime.datetime.strptime(stamp + zone, "%Y-%m-%dT%H:%M:%S%z").timestamp()
    except (ValueError, OverflowError):
        return None


def iso(epoch: float | None) -> str | None:
    """Local time with its UTC offset, e.g. 2026-11-22T04:07:49+08:00 (None stays None)."""
    if epoch is None:
        return None
    return datetime.datetime.fromtimestamp(epoch).astimezone().isoformat(timespec="seconds")
