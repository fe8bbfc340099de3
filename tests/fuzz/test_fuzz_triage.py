"""Triage on random bytes and random mixtures of real log lines: never raises, ends in bounded time."""

from __future__ import annotations

import gzip
import io
import warnings
from functools import lru_cache
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from runbook.library.runbooks import Library, load_library
from runbook.triage.logstream import LogSourceError, read_lines
from runbook.triage.scan import Triage, triage

ROOT = Path(__file__).resolve().parents[2]
LOGS = sorted(p for p in (ROOT / "tests" / "data" / "logs").iterdir() if p.name != "labels.yaml")


def _text(path: Path) -> str:
    raw = path.read_bytes()
    return (gzip.decompress(raw) if path.suffix == ".gz" else raw).decode("utf-8", errors="replace")


LINES = [line for path in LOGS for line in _text(path).splitlines()]
_NOISE = ["\x1b[31m", "\x1b[0m", "\r", "\x00", "\t", "\ufffd", "中文", " " * 300, "x" * 5000, "\\", "(((((",
          "[rank0]: ", "    ", "Traceback (most recent call last):", "\u202e", "\ud7ff"]


@lru_cache(maxsize=1)
def _library() -> Library:
    return load_library([ROOT / "runbooks"])


def _mangled_line() -> st.SearchStrategy[str]:
    line = st.sampled_from(LINES)
    cut = st.tuples(line, st.integers(0, 400)).map(lambda t: t[0][: t[1]])
    noisy = st.tuples(line, st.sampled_from(_NOISE), st.integers(0, 200)).map(
        lambda t: t[0][: t[2]] + t[1] + t[0][t[2]:])
    glued = st.lists(line, min_size=2, max_size=4).map("".join)
    return st.one_of(line, line, cut, noisy, glued, st.text(max_size=200))


def _scan(lines: list[str], chunks: int, time_limit: Any) -> None:
    """`Triage.feed` takes lines as `read_lines` gives them: without a "\n" inside."""
    lines = [line.replace("\n", " ") for line in lines]
    with time_limit(30, f"triage of {len(lines)} lines"):
        scanner = Triage(_library(), on_warning=lambda message: None)
        step = max(1, len(lines) // chunks)
        for start in range(0, len(lines), step):
            scanner.feed(lines[start:start + step])
        for match in scanner.matches():
            assert match.runbook in _library().by_id
            match.to_json("en")
            match.why("zh")
            assert all(hit.line_no >= 1 for hit in match.lines())


@settings(max_examples=settings.default.max_examples * 2)
@given(lines=st.lists(_mangled_line(), max_size=300), chunks=st.integers(1, 5))
def test_mixtures_of_log_lines(lines: list[str], chunks: int, time_limit: Any) -> None:
    _scan(lines, chunks, time_limit)


@settings(max_examples=settings.default.max_examples)
@given(lines=st.lists(_mangled_line(), max_size=100))
def test_the_triage_helper_takes_any_strings(lines: list[str], time_limit: Any) -> None:
    """`triage()` makes lines of whatever it is given (endings, newlines inside)."""
    with time_limit(30, "triage()"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for match in triage(lines, _library()):
            assert match.runbook in _library().by_id


def test_feed_with_a_newline_inside_a_line() -> None:
    """Found by the fuzzing: feed() split such a line in two and lost count of line numbers."""
    scanner = Triage(_library(), on_warning=lambda message: None)
    scanner.feed(["\n", "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low "
                        "on memory."])
    assert scanner.matches()


def _read_all(raw: bytes, time_limit: Any) -> list[str]:
    with time_limit(30, f"reading {len(raw)} bytes"):
        try:
            lines = list(read_lines(io.BytesIO(raw)))
        except LogSourceError as exc:  # the one error a broken log may give, in one line
            assert "\n" not in str(exc)
            return []
    assert all(isinstance(line, str) and "\n" not in line for line in lines)
    return lines


def _gzipped(raw: bytes, cut: int | None) -> bytes:
    packed = gzip.compress(raw, mtime=0)
    return packed if cut is None else packed[: cut % (len(packed) + 1)]


@settings(max_examples=settings.default.max_examples * 2)
@given(raw=st.one_of(st.binary(max_size=4000),
                     st.binary(max_size=2000).map(lambda b: b"\x1f\x8b" + b),
                     st.tuples(st.binary(max_size=2000), st.none() | st.integers(0, 5000)).map(
                         lambda t: _gzipped(t[0], t[1])),
                     st.lists(st.sampled_from(LINES), max_size=50).map(
                         lambda ls: "\r\n".join(ls).encode("utf-16" if len(ls) % 3 == 0 else "utf-8"))),
       chunks=st.integers(1, 3))
def test_random_bytes_read_and_triaged(raw: bytes, chunks: int, time_limit: Any) -> None:
    """Plain, gzip, truncated gzip, a gzip magic before garbage, UTF-16: lines or LogSourceError."""
    _scan(_read_all(raw, time_limit), chunks, time_limit)


def test_every_sample_log_still_reads_and_matches(time_limit: Any) -> None:
    """The baseline the mixtures come from: each real log is read and matches some runbook."""
    for path in LOGS:
        lines = _read_all(path.read_bytes(), time_limit)
        scanner = Triage(_library(), on_warning=lambda message: None)
        scanner.feed(lines)
        assert scanner.matches(), path.name
