"""Reading a log as a stream of text lines: a file or stdin, plain or gzip, any size.

Gzip is recognised by its magic bytes, not by the file name. A log that is not UTF-8 but
GB18030/GBK (written on a Chinese-locale machine) is read as such; other bytes that are not
UTF-8 are replaced, never fatal. Memory stays constant: a line longer than
MAX_LINE characters is cut there and the rest of it is skipped. `LogShape` says what
was read, so an empty or binary file gets its own answer rather than "no match".
"""

from __future__ import annotations

import codecs
import gzip
import io
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import BinaryIO

GZIP_MAGIC = b"\x1f\x8b"
MAX_LINE = 65536  # characters kept of one line
SNIFFED = 1 << 16  # bytes looked at to tell UTF-8 from GB18030
SAMPLED = 1 << 20  # characters looked at to tell text from binary
BINARY_SHARE = 0.3  # unreadable characters (undecodable bytes, control characters) in the sample
_CJK = re.compile("[\u4e00-\u9fff]")
_UNREADABLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\ufffd]")  # not tab, newline, ESC


@dataclass
class LogShape:
    """What a log turned out to be, counted while it is read."""

    lines: int = 0
    cut_lines: int = 0  # lines longer than MAX_LINE, cut there
    sampled: int = 0
    unreadable: int = 0
    encoding: str = "utf-8"

    @property
    def empty(self) -> bool:
        return self.lines == 0

    @property
    def binary(self) -> bool:
        return self.sampled > 0 and self.unreadable / self.sampled > BINARY_SHARE

    def notes(self) -> list[str]:
        """One line each for a person: why the log may give no match."""
        notes = []
        if self.empty:
            notes.append("the log is empty")
        elif self.binary:
            share = round(100 * self.unreadable / self.sampled)
            notes.append(f"the file looks binary, not a text log ({share}% of its first "
                         f"{self.sampled:,} characters are not text)")
        if self.encoding != "utf-8":
            notes.append(f"read as {self.encoding.upper()} (not UTF-8: a Chinese-locale machine's encoding)")
        if self.cut_lines:
            notes.append(f"{self.cut_lines:,} line(s) longer than {MAX_LINE:,} characters were cut there")
        return notes

    def see(self, line: str) -> None:
        self.lines += 1
        if self.sampled < SAMPLED:
            self.sampled += len(line) + 1
            self.unreadable += len(_UNREADABLE.findall(line))


class LogSourceError(OSError):
    """The log cannot be opened or read; the message is one line for a person."""


@contextmanager
def open_log(source: str, shape: LogShape | None = None) -> Iterator[Iterator[str]]:
    """Lines (without their line ending) of the file `source`, or of stdin when it is `-`."""
    try:
        raw: BinaryIO = sys.stdin.buffer if source == "-" else open(source, "rb")  # noqa: SIM115
    except OSError as exc:
        raise LogSourceError(f"cannot read {source}: {exc.strerror or exc}") from None
    try:
        yield read_lines(raw, shape)
    finally:
        if source != "-":
            raw.close()


def read_lines(raw: BinaryIO, shape: LogShape | None = None) -> Iterator[str]:
    """Decode a binary stream (gunzipped when it starts with the gzip magic) into lines."""
    buffered = raw if hasattr(raw, "peek") else io.BufferedReader(raw)  # type: ignore[arg-type,type-var]
    stream: BinaryIO = buffered
    if buffered.peek(2)[:2] == GZIP_MAGIC:  # type: ignore[attr-defined]
        stream = io.BufferedReader(gzip.GzipFile(fileobj=buffered, mode="rb"),  # type: ignore[arg-type]
                                   buffer_size=SNIFFED)
    try:
        encoding = sniff_encoding(stream.peek(SNIFFED)[:SNIFFED])  # type: ignore[attr-defined]
    except (OSError, EOFError) as exc:
        raise LogSourceError(f"the log stops being readable: {exc}") from None
    if shape is not None:
        shape.encoding = encoding
    text = io.TextIOWrapper(stream, encoding=encoding, errors="replace", newline=None)
    try:
        yield from _lines(text, shape or LogShape())
    except (OSError, EOFError) as exc:  # a truncated or corrupt gzip member
        raise LogSourceError(f"the log stops being readable: {exc}") from None
    finally:
        text.detach()


def sniff_encoding(sample: bytes) -> str:
    """"utf-8", or "gb18030" for a log written on a Chinese-locale machine (GBK is a subset):
    text that is not UTF-8 but is GB18030 with Chinese characters in it."""
    try:
        codecs.getincrementaldecoder("utf-8")().decode(sample, final=False)
        return "utf-8"
    except UnicodeDecodeError:
        pass
    try:
        decoded = codecs.getincrementaldecoder("gb18030")().decode(sample, final=False)
    except UnicodeDecodeError:
        return "utf-8"
    return "gb18030" if _CJK.search(decoded) else "utf-8"


def _lines(text: io.TextIOWrapper, shape: LogShape) -> Iterator[str]:
    while True:
        line = text.readline(MAX_LINE)
        if not line:
            return
        if line.endswith("\n"):
            line = line[:-1]
        elif len(line) >= MAX_LINE:  # skip the rest of an overlong line
            shape.cut_lines += 1
            rest = line
            while rest and not rest.endswith("\n"):
                rest = text.readline(MAX_LINE)
        shape.see(line)
        yield line
