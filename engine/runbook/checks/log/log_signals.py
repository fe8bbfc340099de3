"""What the `log` check reads in a training log besides named patterns.

Known error signatures, loss statistics over the last values, and training progress (last
step, steps per minute). Standard library only, like every check module.
"""

from __future__ import annotations

import datetime
import math
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

# name -> regex. Matched case-sensitively except nan_loss, in every line read.
SIGNATURES: dict[str, str] = {
    "watchdog_timeout": r"Watchdog caught collective operation timeout",
    "cuda_oom": r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory",
    "nan_loss": r"(?i:\bloss\b['\"]?[\s:=]+[-+]?(?:nan|inf(?:inity)?)\b|loss is nan|non-finite loss)",
    "missing_keys": r"Missing key\(s\) in state_dict",
    "unexpected_keys": r"Unexpected key\(s\) in state_dict",
    "unrecognized_args": r"error: unrecognized arguments",
    "address_in_use": r"Address already in use|EADDRINUSE",
    "dataloader_killed": r"DataLoader worker \(pid(?:\(s\))? [0-9, ]+\) "
                         r"(?:is killed by signal|exited unexpectedly)",
    "ray_actor_died": r"The actor died|ActorDiedError|RayActorError",
    "nccl_error": r"NCCL error|nccl(?:System|UnhandledCuda|Internal|Remote|InvalidUsage)Error"
                  r"|unhandled system error",
    "traceback": r"Traceback \(most recent call last\)",
}
# A cheap test a line must pass before a signature's regex runs: most lines match nothing, and
# `in` is far cheaper than a regex search. Arguments: the line and the line lowercased.


def _any_of(*needles: str) -> Callable[[str, str], bool]:
    return lambda line, _low: any(needle in line for needle in needles)


def _nan_hint(_line: str, low: str) -> bool:
    if "non-finite" in low:
        return True
    return "loss" in low and ("nan" in low or "inf" in low.replace("info", ""))


_HINTS: dict[str, Callable[[str, str], bool]] = {
    "watchdog_timeout": _any_of("Watchdog caught"),
    "cuda_oom": _any_of("out of memory", "OutOfMemoryError"),
    "nan_loss": _nan_hint,
    "missing_keys": _any_of("Missing key"),
    "unexpected_keys": _any_of("Unexpected key"),
    "unrecognized_args": _any_of("unrecognized arguments"),
    "address_in_use": _any_of("Address already in use", "EADDRINUSE"),
    "dataloader_killed": _any_of("DataLoader worker"),
    "ray_actor_died": _any_of("actor died", "ActorDiedError", "RayActorError"),
    "nccl_error": _any_of("NCCL error", "nccl", "unhandled system error"),
    "traceback": _any_of("Traceback"),
}
_CHECKS = [(name, re.compile(source), _HINTS[name]) for name, source in SIGNATURES.items()]

# Also HF Trainer's {'loss': 2.31, ...}. Each default comes with the substrings a line needs.
DEFAULT_LOSS = r"\b(?:loss|Loss|LOSS)['\"]?[\s:=]+([-+0-9.eE]+|nan|inf|NaN|Inf)"
DEFAULT_STEP = r"(?:\b|_)(?:step|Step|STEP|iter|Iter|iteration|Iteration)\b[\s:=#\[]*(\d+)"
# The learning rate as trainers print it: `lr 3.0e-4`, `lr: 0.001`, HF's `'learning_rate': 1e-05`.
DEFAULT_LR = (r"(?:\b|_)(?:lr|LR|learning_rate|learning rate)['\"]?(?:\s*[:=]\s*|\s+)"
              r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)")
DEFAULT_HINTS = {DEFAULT_LOSS: ("oss", "OSS"), DEFAULT_STEP: ("tep", "TEP", "ter"),
                 DEFAULT_LR: ("lr", "LR", "learning")}
# 2024-03-05 14:22:07, 2024-03-05T14:22:07.123, 2024/03/05 14:22:07
_TIMESTAMP = re.compile(r"(\d{4})[-/](\d{2})[-/](\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,6}))?")
# Rates printed by progress bars and trainers: tqdm it/s or s/it, Megatron ms per iteration.
_RATES = (
    (re.compile(r"(\d+(?:\.\d+)?)\s*it/s\b"), lambda x: x * 60.0),
    (re.compile(r"(\d+(?:\.\d+)?)\s*s/it\b"), lambda x: 60.0 / x if x else None),
    (re.compile(r"elapsed time per iteration \(ms\):\s*(\d+(?:\.\d+)?)"),
     lambda x: 60_000.0 / x if x else None),
)
_RATE_LOOKBACK = 50  # lines from the end searched for a printed rate
_LINE_MAX = 400
_TREND_MIN_CHANGE = 0.02  # relative change between the halves of the window


# -- signatures ---------------------------------------------------------------------------------


def scan_signatures(lines: list[str]) -> dict[str, dict[str, Any]]:
    """Per signature: {count, first_line_no, last_line_no, last_line} (line numbers count lines read)."""
    found: dict[str, dict[str, Any]] = {
        name: {"count": 0, "first_line_no": None, "last_line_no": None, "last_line": None}
        for name in SIGNATURES
    }
    for number, line in enumerate(lines, start=1):
        low = line.lower()
        for name, regex, hint in _CHECKS:
            if hint(line, low) and regex.search(line):
                entry = found[name]
                entry["count"] += 1
                entry["first_line_no"] = entry["first_line_no"] or number
                entry["last_line_no"] = number
                entry["last_line"] = line[:_LINE_MAX]
    return found


def first_signature(found: dict[str, dict[str, Any]]) -> str | None:
    """The signature seen first: usually the cause (a traceback only precedes its error)."""
    seen = [(entry["first_line_no"], name) for name, entry in found.items()
            if entry["count"] and name != "traceback"]
    return min(seen)[1] if seen else None


def counts(found: dict[str, dict[str, Any]]) -> dict[str, int]:
    """name -> count of the signatures that occur."""
    return {name: entry["count"] for name, entry in found.items() if entry["count"]}


# -- values of a pattern ------------------------------------------------------------------------


def last_matches(lines: list[str], regex: re.Pattern[str], limit: int) -> list[tuple[int, str, str]]:
    """(line_no, first group, line) of the last `limit` lines that match, oldest first."""
    found: list[tuple[int, str, str]] = []
    hints = DEFAULT_HINTS.get(regex.pattern, ("",))
    for index in range(len(lines) - 1, -1, -1):
        if len(found) >= limit:
            break
        if not any(hint in lines[index] for hint in hints):
            continue
        m = regex.search(lines[index])
        if m and m.groups() and m.group(1) is not None:
            found.append((index + 1, m.group(1), lines[index]))
    found.reverse()
    return found


def to_float(text: str) -> float | None:
    try:
        return float(text.strip().rstrip(",;").replace(",", ""))
    except ValueError:
        return None


# -- loss -----------------------------------------------------------------------------------------


def loss_stats(values: list[str]) -> dict[str, Any]:
    """Statistics of the loss values printed (oldest first); NaN/Inf counted, not averaged."""
    numbers = [v for v in (to_float(text) for text in values) if v is not None]
    finite = [v for v in numbers if math.isfinite(v)]
    last = numbers[-1] if numbers else None
    return {
        "count": len(numbers),
        "last": last if last is not None and math.isfinite(last) else None,
        "last_raw": values[-1].strip() if values else None,
        "first": finite[0] if finite else None,
        "min": min(finite) if finite else None,
        "max": max(finite) if finite else None,
        "mean": round(sum(finite) / len(finite), 6) if finite else None,
        "trend": trend(finite),
        "nan_count": sum(1 for v in numbers if math.isnan(v)),
        "inf_count": sum(1 for v in numbers if math.isinf(v)),
    }


def lr_stats(values: list[str]) -> dict[str, Any]:
    """The learning rates printed (oldest first): a schedule moves them; `distinct` 1 over many
    steps means none is applied (a DeepSpeed `scheduler` block overriding the trainer's, or a
    warmup that never starts)."""
    numbers = [v for v in (to_float(text) for text in values) if v is not None and math.isfinite(v)]
    return {"count": len(numbers), "first": numbers[0] if numbers else None,
            "last": numbers[-1] if numbers else None, "min": min(numbers) if numbers else None,
            "max": max(numbers) if numbers else None, "distinct": len(set(numbers))}


def trend(values: list[float]) -> str | None:
    """down / up / flat: the later half's mean against the earlier half's (None under 2 values)."""
    if len(values) < 2:
        return None
    if len(values) < 4:
        before, after = values[0], values[-1]
    else:
        half = len(values) // 2
        before = sum(values[:half]) / half
        after = sum(values[-half:]) / half
    change = (after - before) / max(abs(before), 1e-12)
    if change < -_TREND_MIN_CHANGE:
        return "down"
    return "up" if change > _TREND_MIN_CHANGE else "flat"


# -- progress -------------------------------------------------------------------------------------


def progress(
    lines: list[str], steps: list[tuple[int, str, str]], age_s: float | None,
    file_span: Callable[[], float | None] | None,
) -> dict[str, Any]:
    """{last_step, steps_per_min, basis, seconds_since_progress} from the step matches.

    `file_span` gives the time from the log's creation to its last write; it is passed only when
    the whole file was read (so the first step read is the first step logged), and called only
    when the lines themselves tell no rate.
    """
    numbered = [(no, value, line) for no, text, line in steps
                if (value := to_float(text)) is not None]
    last_step = _plain(numbered[-1][1]) if numbered else None
    rate, basis = _rate_from_timestamps(numbered)
    if rate is None:
        rate, basis = _printed_rate(lines)
    if rate is None and file_span is not None and len(numbered) >= 2:
        span, done = file_span(), numbered[-1][1] - numbered[0][1]
        if span and done > 0:
            rate, basis = done / span * 60.0, "file_times"
    last_is_progress = bool(numbered) and numbered[-1][0] == len(lines)
    return {
        "last_step": last_step,
        "steps_per_min": None if rate is None else round(rate, 3),
        "basis": basis if rate is not None else "none",
        "seconds_since_progress": age_s if last_is_progress else None,
    }


def _rate_from_timestamps(numbered: list[tuple[int, float, str]]) -> tuple[float | None, str]:
    timed = [(when, value) for _, value, line in numbered if (when := line_time(line)) is not None]
    if len(timed) < 2:
        return None, "none"
    (t0, s0), (t1, s1) = timed[0], timed[-1]
    if t1 <= t0 or s1 <= s0:
        return None, "none"
    return (s1 - s0) / (t1 - t0) * 60.0, "timestamps"


def _printed_rate(lines: list[str]) -> tuple[float | None, str]:
    for line in reversed(lines[-_RATE_LOOKBACK:]):
        for regex, per_minute in _RATES:
            matches = regex.findall(line)
            if matches:
                rate = per_minute(float(matches[-1]))
                if rate:
                    return rate, "printed_rate"
    return None, "none"


def line_time(line: str) -> float | None:
    """Seconds (naive local time, for differences only) of the first timestamp in a line."""
    m = _TIMESTAMP.search(line)
    if not m:
        return None
    parts = [int(p) for p in m.groups()[:6]]
    fraction = float("0." + m.group(7)) if m.group(7) else 0.0
    try:
        when = datetime.datetime(*parts)  # type: ignore[arg-type]
    except ValueError:
        return None
    return (when - datetime.datetime(1970, 1, 1)).total_seconds() + fraction


def _plain(value: float) -> float | int:
    return int(value) if value.is_integer() else value
