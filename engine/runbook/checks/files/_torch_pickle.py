"""Tensor names and shapes of a `torch.save` zip, read from its data.pkl opcodes: nothing unpickled.

`pickletools.genops` only decodes opcodes; this module replays them on inert stand-ins (strings,
numbers, tuples, `_Obj` for a call or a global), so no class is imported and no code runs. A
tensor is a call of `torch._utils._rebuild_tensor_v2` (or a parameter wrapping one) whose third
argument is its size tuple: enough to count the zero-element tensors ZeRO-3 leaves in a state dict
saved without gathering (each rank holds a shard, the module keeps `torch.Size([0])`).
"""

from __future__ import annotations

import pickletools
import zipfile
from dataclasses import dataclass, field
from typing import Any

_MAX_PKL = 64 * 1024 * 1024  # a state dict's pickle is small next to its tensors
_MAX_OPS = 5_000_000
_MAX_DEPTH = 6
_TENSOR_CALLS = frozenset({"torch._utils._rebuild_tensor_v2", "torch._utils._rebuild_tensor",
                           "torch._utils._rebuild_qtensor"})
_WRAPPER_CALLS = frozenset({"torch._utils._rebuild_parameter",
                            "torch._utils._rebuild_parameter_with_state"})
MODEL_KEYS = ("model", "state_dict", "model_state_dict", "module")


class PickleScanError(Exception):
    """data.pkl could not be replayed (an opcode this reader does not model, or a bad stream)."""


@dataclass
class _Obj:
    """A global, or the result of calling one; SETITEM(S) and BUILD land here."""

    name: str
    args: Any = None
    items: list[tuple[Any, Any]] = field(default_factory=list)


@dataclass
class _Mark:
    pass


def zip_tensor_shapes(path: str) -> dict[str, list[int]]:
    """{dotted key: shape} of the model state dict in a torch zip (PickleScanError if unreadable)."""
    try:
        with zipfile.ZipFile(path) as archive:
            name = next((n for n in archive.namelist() if n.endswith("data.pkl")), None)
            if name is None:
                raise PickleScanError("no data.pkl in the archive")
            if archive.getinfo(name).file_size > _MAX_PKL:
                raise PickleScanError(f"data.pkl is larger than {_MAX_PKL} bytes")
            raw = archive.read(name)
    except (zipfile.BadZipFile, OSError, KeyError) as exc:
        raise PickleScanError(f"unreadable zip ({exc})") from exc
    return state_dict_shapes(replay(raw))


def replay(raw: bytes) -> Any:
    """The object data.pkl describes, as stand-ins (see module docstring)."""
    stack: list[Any] = []
    memo: dict[int, Any] = {}
    try:
        for count, (op, arg, _pos) in enumerate(pickletools.genops(raw)):
            if count > _MAX_OPS:
                raise PickleScanError("too many opcodes")
            if op.name == "STOP":
                return stack.pop()
            _step(op.name, arg, stack, memo)
    except PickleScanError:
        raise
    except (ValueError, IndexError, KeyError, TypeError) as exc:
        raise PickleScanError(f"cannot replay data.pkl ({type(exc).__name__}: {exc})") from exc
    raise PickleScanError("data.pkl has no STOP opcode (truncated?)")


def _pop_mark(stack: list[Any]) -> list[Any]:
    for index in range(len(stack) - 1, -1, -1):
        if isinstance(stack[index], _Mark):
            items = stack[index + 1:]
            del stack[index:]
            return items
    raise PickleScanError("MARK missing")


_CONSTANTS = {"NONE": None, "NEWTRUE": True, "NEWFALSE": False, "EMPTY_TUPLE": ()}
_PUSH_ARG = frozenset({"BININT", "BININT1", "BININT2", "INT", "LONG", "LONG1", "LONG4", "BINFLOAT",
                       "FLOAT", "SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE",
                       "SHORT_BINSTRING", "BINSTRING", "STRING", "SHORT_BINBYTES", "BINBYTES",
                       "BINBYTES8", "BYTEARRAY8"})


def _step(name: str, arg: Any, stack: list[Any], memo: dict[int, Any]) -> None:
    if name in ("PROTO", "FRAME"):
        return
    if name in _PUSH_ARG:
        stack.append(arg)
    elif name in _CONSTANTS:
        stack.append(_CONSTANTS[name])
    elif name == "MARK":
        stack.append(_Mark())
    elif name in ("EMPTY_DICT", "EMPTY_LIST", "EMPTY_SET"):
        stack.append(_Obj(name.lower()))
    elif name in ("TUPLE", "LIST", "DICT", "FROZENSET"):
        items = _pop_mark(stack)
        stack.append(tuple(items) if name == "TUPLE" else _container(name, items))
    elif name in ("TUPLE1", "TUPLE2", "TUPLE3"):
        size = int(name[-1])
        items = stack[-size:]
        del stack[-size:]
        stack.append(tuple(items))
    elif name == "GLOBAL":
        stack.append(_Obj(str(arg).replace(" ", ".")))
    elif name == "STACK_GLOBAL":
        attr, module = stack.pop(), stack.pop()
        stack.append(_Obj(f"{module}.{attr}"))
    elif name in ("REDUCE", "NEWOBJ"):
        args, func = stack.pop(), stack.pop()
        stack.append(_Obj(func.name if isinstance(func, _Obj) else "?", args))
    elif name == "NEWOBJ_EX":
        _kwargs, args, cls = stack.pop(), stack.pop(), stack.pop()
        stack.append(_Obj(cls.name if isinstance(cls, _Obj) else "?", args))
    elif name in ("BINPERSID", "PERSID"):
        pid = stack.pop() if name == "BINPERSID" else arg
        stack.append(_Obj("persistent", pid))
    else:
        _step_containers(name, arg, stack, memo)


def _container(name: str, items: list[Any]) -> _Obj:
    obj = _Obj(name.lower())
    if name == "DICT":
        obj.items = _pairs(items)
    return obj


def _pairs(items: list[Any]) -> list[tuple[Any, Any]]:
    """[k1, v1, k2, v2] -> [(k1, v1), (k2, v2)] (zip's strict= needs Python 3.10 on the node)."""
    return [(items[i], items[i + 1]) for i in range(0, len(items) - 1, 2)]


def _step_containers(name: str, arg: Any, stack: list[Any], memo: dict[int, Any]) -> None:
    if name in ("BINPUT", "LONG_BINPUT", "PUT"):
        memo[int(arg)] = stack[-1]
    elif name == "MEMOIZE":
        memo[len(memo)] = stack[-1]
    elif name in ("BINGET", "LONG_BINGET", "GET"):
        stack.append(memo[int(arg)])
    elif name == "SETITEM":
        value, key = stack.pop(), stack.pop()
        _target(stack).items.append((key, value))
    elif name == "SETITEMS":
        items = _pop_mark(stack)
        _target(stack).items.extend(_pairs(items))
    elif name in ("APPEND", "APPENDS", "ADDITEMS"):
        if name == "APPEND":
            stack.pop()
        else:
            _pop_mark(stack)
    elif name == "BUILD":
        stack.pop()  # the state (e.g. a state dict's _metadata): not needed for shapes
    elif name == "POP":
        stack.pop()
    elif name == "POP_MARK":
        _pop_mark(stack)
    elif name == "DUP":
        stack.append(stack[-1])
    else:
        raise PickleScanError(f"opcode {name} not modelled")


def _target(stack: list[Any]) -> _Obj:
    target = stack[-1] if stack else None
    if not isinstance(target, _Obj):
        raise PickleScanError("SETITEM on something that is not a dict")
    return target


# -- from the replayed object to key -> shape ----------------------------------------------------


def tensor_shape(value: Any) -> list[int] | None:
    """The size of a rebuilt tensor (or parameter), else None."""
    if not isinstance(value, _Obj) or not isinstance(value.args, tuple):
        return None
    if value.name in _WRAPPER_CALLS and value.args:
        return tensor_shape(value.args[0])
    if value.name in _TENSOR_CALLS and len(value.args) >= 3 and isinstance(value.args[2], tuple):
        return [int(d) for d in value.args[2]]
    return None


def _mapping(value: Any) -> list[tuple[Any, Any]] | None:
    return value.items if isinstance(value, _Obj) and tensor_shape(value) is None else None


def shapes_of(value: Any, prefix: str = "", depth: int = 0) -> dict[str, list[int]]:
    shapes: dict[str, list[int]] = {}
    items = _mapping(value)
    if items is None or depth > _MAX_DEPTH:
        return shapes
    for key, item in items:
        name = prefix + str(key)
        shape = tensor_shape(item)
        if shape is not None:
            shapes[name] = shape
        else:
            shapes.update(shapes_of(item, name + ".", depth + 1))
    return shapes


def state_dict_shapes(top: Any) -> dict[str, list[int]]:
    """The model weights: the file itself when it is a state dict, else its model/module entry."""
    items = dict((str(k), v) for k, v in (_mapping(top) or []))
    for key in MODEL_KEYS:
        if key in items and shapes_of(items[key]):
            return shapes_of(items[key])
    return shapes_of(top)
