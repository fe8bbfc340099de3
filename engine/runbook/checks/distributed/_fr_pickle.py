"""A restricted reader for the pickles torch's flight recorder writes: plain data, nothing else.

The flight recorder's dump (`_dump_fr_trace()`, the file the NCCL watchdog writes on a timeout)
is a pickle of dicts, lists, tuples, strings, numbers, booleans and None. A pickle can name any
global and call it, so an untrusted one is code. This reader refuses every global (`find_class`
raises) and every persistent id, which leaves the opcodes that build only containers and
scalars; it then walks the result and refuses anything that is not a dict, list, tuple, str,
bytes, int, float, bool or None (a set, a bytearray), nesting deeper than MAX_DEPTH, or more
than MAX_NODES values (shared references counted each time: no billion laughs). Input over
`limit` bytes is refused before any of it is read.

Standard library only, like every module the checks use on a node. Nothing else in the engine
unpickles anything.
"""

from __future__ import annotations

import io
import pickle
from typing import Any

MAX_BYTES = 64 * 1024 * 1024
MAX_DEPTH = 64
MAX_NODES = 2_000_000
_SCALARS = (str, bytes, int, float, bool, type(None))


class UnsafePickleError(ValueError):
    """The data is not a plain-data pickle this reader accepts; the message says why."""


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise UnsafePickleError(
            f"refused: the pickle names the global {module}.{name}; a flight-recorder dump holds "
            "plain data only, so this file is not one (or was tampered with)")

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickleError("refused: the pickle uses a persistent id; a flight-recorder dump "
                                "holds plain data only")


def loads(data: bytes, limit: int = MAX_BYTES) -> Any:
    """The plain data `data` pickles, or UnsafePickleError saying why not (never runs code)."""
    if len(data) > limit:
        raise UnsafePickleError(f"refused: {len(data):,} bytes is over the {limit:,}-byte limit")
    if not data:
        raise UnsafePickleError("not a pickle: the data is empty")
    try:
        value = _PlainUnpickler(io.BytesIO(data), encoding="utf-8").load()
    except UnsafePickleError:
        raise
    except RecursionError as exc:
        raise UnsafePickleError("refused: nested too deeply") from exc
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError, IndexError,
            AttributeError, OverflowError, MemoryError, UnicodeDecodeError) as exc:
        raise UnsafePickleError(f"not a readable pickle: {type(exc).__name__}: {exc}"[:300]) from exc
    check_plain(value)
    return value


def load_file(path: str, limit: int = MAX_BYTES) -> Any:
    """`loads` of a file's content; a file over `limit` bytes is refused without reading it."""
    with open(path, "rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise UnsafePickleError(f"refused: the file is over the {limit:,}-byte limit")
    return loads(data, limit)


def check_plain(value: Any, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES) -> None:
    """Raise UnsafePickleError unless `value` is plain data within the depth and size bounds."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    seen = 0
    while stack:
        item, depth = stack.pop()
        seen += 1
        if seen > max_nodes:
            raise UnsafePickleError(f"refused: more than {max_nodes:,} values")
        if depth > max_depth:
            raise UnsafePickleError(f"refused: nested deeper than {max_depth} levels")
        kind = type(item)
        if kind in _SCALARS:
            continue
        if kind is dict:
            for key, child in item.items():
                if type(key) not in _SCALARS:
                    raise UnsafePickleError(f"refused: a dict key of type {type(key).__name__}")
                stack.append((child, depth + 1))
        elif kind is list or kind is tuple:
            stack.extend((child, depth + 1) for child in item)
        else:
            raise UnsafePickleError(f"refused: a value of type {kind.__name__} (plain data only)")
