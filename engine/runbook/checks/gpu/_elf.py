"""A small ELF reader (standard library only): does a shared library define a dynamic symbol?

`nm -D` answers the same question, but a node may have no binutils. Only the section headers,
.dynsym and its string table are read (a few MiB even for a 500 MiB libcublasLt), never the
code. A library whose section headers were stripped answers None: unknown, not "missing".
"""

from __future__ import annotations

import struct
from typing import BinaryIO

SHT_DYNSYM = 11
SHN_UNDEF = 0
# Bounds: a .dynsym or .dynstr bigger than this is not a library we can judge in a probe.
_MAX_TABLE = 64 * 1024 * 1024
_MAX_SECTIONS = 65_536


class ElfError(ValueError):
    """The file is not an ELF shared object this reader understands."""


def _header(fh: BinaryIO) -> tuple[str, bool, int, int, int]:
    """(endian, is_64, shoff, shentsize, shnum) from the ELF header."""
    ident = fh.read(16)
    if len(ident) < 16 or ident[:4] != b"\x7fELF":
        raise ElfError("not an ELF file")
    if ident[4] not in (1, 2) or ident[5] not in (1, 2):
        raise ElfError("unknown ELF class or byte order")
    is_64 = ident[4] == 2
    endian = "<" if ident[5] == 1 else ">"
    rest = fh.read(48 if is_64 else 36)
    if is_64:
        if len(rest) < 48:
            raise ElfError("truncated ELF header")
        shoff, = struct.unpack_from(endian + "Q", rest, 24)
        shentsize, shnum = struct.unpack_from(endian + "HH", rest, 42)
    else:
        if len(rest) < 36:
            raise ElfError("truncated ELF header")
        shoff, = struct.unpack_from(endian + "I", rest, 16)
        shentsize, shnum = struct.unpack_from(endian + "HH", rest, 30)
    return endian, is_64, shoff, shentsize, shnum


def _sections(fh: BinaryIO, endian: str, is_64: bool, shoff: int, shentsize: int,
              shnum: int) -> list[tuple[int, int, int, int, int]]:
    """(type, offset, size, link, entsize) of each section header."""
    if shoff == 0 or shnum == 0 or shnum > _MAX_SECTIONS:
        return []
    fh.seek(shoff)
    raw = fh.read(shentsize * shnum)
    out = []
    for i in range(len(raw) // shentsize):
        base = i * shentsize
        if is_64:
            _name, typ, _flags, _addr, off, size, link, _info, _align, entsize = struct.unpack_from(
                endian + "IIQQQQIIQQ", raw, base)
        else:
            _name, typ, _flags, _addr, off, size, link, _info, _align, entsize = struct.unpack_from(
                endian + "IIIIIIIIII", raw, base)
        out.append((typ, off, size, link, entsize))
    return out


def _read(fh: BinaryIO, offset: int, size: int) -> bytes:
    if size > _MAX_TABLE:
        raise ElfError(f"table of {size} bytes is too large to read")
    fh.seek(offset)
    return fh.read(size)


def dynamic_symbols(path: str) -> set[str] | None:
    """Names of the symbols `path` defines in .dynsym (what the dynamic loader can bind to);
    None when the file has no section headers to find .dynsym by. Raises OSError or ElfError."""
    with open(path, "rb") as fh:
        endian, is_64, shoff, shentsize, shnum = _header(fh)
        sections = _sections(fh, endian, is_64, shoff, shentsize, shnum)
        dynsym = next((s for s in sections if s[0] == SHT_DYNSYM), None)
        if dynsym is None or dynsym[3] >= len(sections):
            return None
        _typ, off, size, link, entsize = dynsym
        entsize = entsize or (24 if is_64 else 16)
        table = _read(fh, off, size)
        _t, str_off, str_size, _l, _e = sections[link]
        strings = _read(fh, str_off, str_size)
    names: set[str] = set()
    for base in range(0, len(table) - entsize + 1, entsize):
        if is_64:
            name_at, _info, _other, shndx = struct.unpack_from(endian + "IBBH", table, base)
        else:
            name_at, = struct.unpack_from(endian + "I", table, base)
            shndx, = struct.unpack_from(endian + "H", table, base + 14)
        if shndx == SHN_UNDEF or not name_at or name_at >= len(strings):
            continue
        end = strings.find(b"\0", name_at)
        names.add(strings[name_at:end if end >= 0 else len(strings)].decode("utf-8", "replace"))
    return names


def defines(path: str, symbol: str) -> bool | None:
    """Whether `path` defines `symbol` (True/False), or None when that cannot be told."""
    try:
        names = dynamic_symbols(path)
    except (OSError, ElfError):
        return None
    return None if names is None else symbol in names
