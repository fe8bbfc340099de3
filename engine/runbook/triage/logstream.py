"""Reading a log as a stream of text lines: a file or stdin, plain or gzip, any size.

Gzip is recognised by its magic bytes, not by the file name. Bytes that are not
UTF-8 are replaced, never fatal. Memory stays constant: a line longer than
MAX_LINE characters is cut there and the rest of it is skipped.
"""

from __future__ import annotations

import gzip
import io
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import BinaryIO

GZIP_MAGIC = b"\x1f\x8b"
MAX_LINE = 65536  # characters kept of one line


class LogSourceError(OSError):
    """The log cannot be opened or read; the message is one line for a person."""


@contextmanager
def open_log(source: str) -> Iterator[Iterator[str]]:
    """Lines (without their line ending) of the file `source`, or of stdin when it is `-`."""
    try:
        raw: BinaryIO = sys.stdin.buffer if source == "-" else open(source, "rb")  # noqa: SIM115
    except OSError as exc:
        raise LogSourceError(f"cannot read {source}: {exc.strerror or exc}") from None
    try:
        yield read_lines(raw)
    finally:
        if source != "-":
            raw.close()


def read_lines(raw: BinaryIO) -> Iterator[str]:
    """Decode a binary stream (gunzipped when it starts with the gzip magic) into lines."""
    buffered = raw if hasattr(raw, "peek") else io.BufferedReader(raw)  # type: ignore[arg-type,type-var]
    stream: BinaryIO = buffered
    if buffered.peek(2)[:2] == GZIP_MAGIC:  # type: ignore[attr-defined]
        stream = gzip.GzipFile(fileobj=buffered, mode="rb")  # type: ignore[assignment]
    text = io.TextIOWrapper(stream, encoding="utf-8", errors="replace", newline=None)
    try:
        yield from _lines(text)
    except (OSError, EOFError) as exc:  # a truncated or corrupt gzip member
        raise LogSourceError(f"the log stops being readable: {exc}") from None
    finally:
        text.detach()


def _lines(text: io.TextIOWrapper) -> Iterator[str]:
    while True:
        line = text.readline(MAX_LINE)
        if not line:
            return
        if line.endswith("\n"):
            yield line[:-1]
            continue
        if len(line) >= MAX_LINE:  # skip the rest of an overlong line
            rest = line
            while rest and not rest.endswith("\n"):
                rest = text.readline(MAX_LINE)
        yield line.rstrip("\n")
