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
_CONSTANTS = {None: "null", True: "true", False: "false"}


def dumps(obj: Any, default: Callable[[Any], Any] = str) -> str:
    """`json.dumps(obj, indent=2, ensure_ascii=False, default=default)`, byte for byte."""
    writer = _Writer(default)
    writer.write(obj, "")
    return "".join(writer.out)


def _float(value: float) -> str:
    if value != value:
        return "NaN"
    if value == _INF:
        return "Infinity"
    if value == -_INF:
        return "-Infinity"
    return _FLOAT_REPR(value)


def _key(key: Any) -> str:
    """A dict key as the standard library writes it (always a JSON string)."""
    if isinstance(key, str):
        return encode_basestring(key)
    if key is True or key is False or key is None:
        return '"' + _CONSTANTS[key] + '"'
    if isinstance(key, float):
        return encode_basestring(_float(key))
    if isinstance(key, int):
        return encode_basestring(_INT_REPR(key))
    raise TypeError(f"keys must be str, int, float, bool or None, not {key.__class__.__name__}")


class _Writer:
    def __init__(self, default: Callable[[Any], Any]) -> None:
        self.default = default
        self.out: list[str] = []
        self.markers: set[int] = set()  # containers being written: a value met inside itself

    def write(self, o: Any, indent: str) -> None:
        t = type(o)
        if t is str:
            self.out.append(encode_basestring(o))
        elif t is dict or (t is not list and isinstance(o, dict)):
            self._dict(o, indent)
        elif t is list or t is tuple or isinstance(o, (list, tuple)):
            self._list(o, indent)
        elif o is None or o is True or o is False:
            self.out.append(_CONSTANTS[o])
        elif isinstance(o, str):
            self.out.append(encode_basestring(o))
        elif isinstance(o, int):
            self.out.append(_INT_REPR(o))
        elif isinstance(o, float):
            self.out.append(_float(o))
        else:
            self._enter(o, indent)
            self.write(self.default(o), indent)
            self.markers.discard(id(o))

    def _enter(self, o: Any, indent: str) -> tuple[str, str]:
        """Mark a container (or a value given to `default`) as being written: its inner
        indentation and the separator between its items. A value met inside itself is refused,
        as the standard library refuses it."""
        mark = id(o)
        if mark in self.markers:
            raise ValueError("Circular reference detected")
        self.markers.add(mark)
        inner = indent + "  "
        return inner, ",\n" + inner

    def _dict(self, o: dict[Any, Any], indent: str) -> None:
        append, enc = self.out.append, encode_basestring
        if not o:
            append("{}")
            return
        inner, sep = self._enter(o, indent)
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
                append(_key(k) + ": ")
            if vt is int:
                append(_INT_REPR(v))
            elif v is None:
                append("null")
            else:
                self.write(v, inner)
        append("\n" + indent + "}")
        self.markers.discard(id(o))

    def _list(self, o: list[Any] | tuple[Any, ...], indent: str) -> None:
        append = self.out.append
        if not o:
            append("[]")
            return
        inner, sep = self._enter(o, indent)
        if all(type(v) is str for v in o):  # a list of strings: the C encoder for each, one join
            append("[\n" + inner + sep.join(map(encode_basestring, o)) + "\n" + indent + "]")
        else:
            append("[\n" + inner)
            first = True
            for v in o:
                if first:
                    first = False
                else:
                    append(sep)
                self.write(v, inner)
            append("\n" + indent + "]")
        self.markers.discard(id(o))
