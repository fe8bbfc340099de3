"""Indented JSON, byte for byte what `json.dumps(obj, indent=2, ensure_ascii=False, default=str)`
writes, in a third to a half of its time.

With `indent`, the standard library leaves its C encoder for a generator per value in Python
(CPython before 3.14). Here one recursive function appends to a list, strings go through the C
string encoder, and a list of strings is joined in one call. The JSON report of a run is the
largest thing a repeat of `runbook run` writes (issue #28: client CPU per host).
"""

from __future__ import annotations

from collections.abc import Callable
from json.encoder import encode_basestring  # the C implementation where there is one
from typing import Any

_FLOAT_REPR = float.__repr__
_INT_REPR = int.__repr__
_INF = float("inf")


def _float(value: float) -> str:
    if value != value:
        return "NaN"
    if value == _INF:
        return "Infinity"
    if value == -_INF:
        return "-Infinity"
    return _FLOAT_REPR(value)


def dumps(obj: Any, default: Callable[[Any], Any] = str) -> str:
    """`json.dumps(obj, indent=2, ensure_ascii=False, default=default)`, byte for byte."""
    out: list[str] = []
    append = out.append
    enc = encode_basestring
    markers: set[int] = set()

    def key_text(key: Any) -> str:
        if isinstance(key, str):
            return enc(key)
        if key is True:
            return '"true"'
        if key is False:
            return '"false"'
        if key is None:
            return '"null"'
        if isinstance(key, float):
            return enc(_float(key))
        if isinstance(key, int):
            return enc(_INT_REPR(key))
        raise TypeError(f"keys must be str, int, float, bool or None, not {key.__class__.__name__}")

    def enter(o: Any, indent: str) -> tuple[str, str]:
        """Mark a container (or a value given to `default`) as being written: its inner
        indentation and the separator between its items. A value met inside itself is refused,
        as the standard library refuses it."""
        mark = id(o)
        if mark in markers:
            raise ValueError("Circular reference detected")
        markers.add(mark)
        inner = indent + "  "
        return inner, ",\n" + inner

    def write(o: Any, indent: str) -> None:
        t = type(o)
        if t is str:
            append(enc(o))
        elif t is dict or (t is not list and isinstance(o, dict)):
            if not o:
                append("{}")
                return
            inner, sep = enter(o, indent)
            append("{\n" + inner)
            first = True
            for k, v in o.items():
                if first:
                    first = False
                else:
                    append(sep)
                vt = type(v)
                if type(k) is str:  # the common case, inline: one call less per entry
                    if vt is str:
                        append(enc(k) + ": " + enc(v))
                        continue
                    append(enc(k) + ": ")
                else:
                    append(key_text(k) + ": ")
                if vt is int:
                    append(_INT_REPR(v))
                elif v is None:
                    append("null")
                else:
                    write(v, inner)
            append("\n" + indent + "}")
            markers.discard(id(o))
        elif t is list or t is tuple or isinstance(o, (list, tuple)):
            if not o:
                append("[]")
                return
            inner, sep = enter(o, indent)
            if all(type(v) is str for v in o):  # a list of strings: the C encoder for each, one join
                append("[\n" + inner + sep.join(map(enc, o)) + "\n" + indent + "]")
                markers.discard(id(o))
                return
            append("[\n" + inner)
            first = True
            for v in o:
                if first:
                    first = False
                else:
                    append(sep)
                write(v, inner)
            append("\n" + indent + "]")
            markers.discard(id(o))
        elif o is None:
            append("null")
        elif o is True:
            append("true")
        elif o is False:
            append("false")
        elif t is int:
            append(_INT_REPR(o))
        elif t is float:
            append(_float(o))
        elif isinstance(o, str):
            append(enc(o))
        elif isinstance(o, int):
            append(_INT_REPR(o))
        elif isinstance(o, float):
            append(_float(o))
        else:
            enter(o, indent)
            write(default(o), indent)
            markers.discard(id(o))

    write(obj, "")
    return "".join(out)
