"""The child-process half of the `checkpoint` check: load checkpoint files with torch, describe them.

Runs as `python -c <this source> <payload json>` (see `_subpython`): standard library at module
level, nothing from runbook, torch imported inside `answer`; Python 3.8 syntax. The answer is one
line, MARK + JSON, written last on stdout; anything the loaded code prints goes to stderr.

Payload: {"files": [paths], "weights_only": bool, "allow_pickle": bool,
          "reference": {"files": [paths]} | {"target": "pkg.mod:factory", "kwargs": {},
                                             "pythonpath": "dir1:dir2"} | null}
Answer:  {"torch_version", "checkpoint": LOADED, "reference": LOADED | BUILT} or {"missing", "error"};
         LOADED = {"shapes": {key: [dims]}, "load_s", "corrupt", "load_error", "weights_only_failed",
                   "weights_only_error", "loaded_with_pickle", "top_level_keys", "state_dict_key",
                   "has": {optimizer, scheduler, rng, step}, "step_value"}
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import pickle
import re
import sys
import time
import zipfile
from collections.abc import Mapping
from typing import Any

MARK = "RUNBOOK-WORKER-RESULT "

MODEL_KEYS = ("model", "state_dict", "model_state_dict", "module")
HAS_KEYS = {
    "optimizer": ("optimizer", "optimizer_state_dict", "optimizer_states", "optim", "optimizer_state"),
    "scheduler": ("lr_scheduler", "scheduler", "lr_schedulers", "scheduler_state_dict",
                  "lr_scheduler_state_dict"),
    "rng": ("rng_state", "torch_rng_state", "cuda_rng_state", "numpy_rng_state", "python_rng_state",
            "rng_states", "rng"),
    "step": ("step", "global_step", "global_steps", "iteration", "iter", "epoch", "train_state"),
}
RESERVED_KEYS = frozenset(MODEL_KEYS).union(*HAS_KEYS.values())
_CORRUPT_HINTS = ("truncated", "central directory", "PytorchStreamReader", "Ran out of input",
                  "corrupt", "unexpected end", "invalid load key", "EOF")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_MAX_TOP_KEYS = 50
_MAX_DEPTH = 4


class WeightsOnlyFailed(Exception):
    """torch.load(weights_only=True) refused the file (or this torch has no weights_only)."""


def main() -> None:
    real_stdout = sys.stdout
    try:
        with contextlib.redirect_stdout(sys.stderr):
            result = answer(json.loads(sys.argv[1]))
    except BaseException as exc:  # the parent needs an answer, whatever went wrong
        result = {"error": one_line(exc)}
    real_stdout.write("\n" + MARK + json.dumps(result, default=str) + "\n")
    real_stdout.flush()


def answer(payload: dict[str, Any]) -> dict[str, Any]:
    try:
        import torch
    except Exception as exc:  # ImportError, or a broken install failing to load its libraries
        return {"missing": "torch", "error": one_line(exc)}
    result: dict[str, Any] = {"torch_version": str(torch.__version__)}
    if payload.get("files"):
        result["checkpoint"] = load_files(torch, payload["files"], payload)
    reference = payload.get("reference")
    if reference and reference.get("files"):
        result["reference"] = load_files(torch, reference["files"], payload)
    elif reference and reference.get("target"):
        result["reference"] = build_reference(torch, reference)
    return result


def one_line(exc: BaseException) -> str:
    lines = [line.strip() for line in _ANSI.sub("", str(exc)).splitlines() if line.strip()]
    text = lines[0] if lines else ""
    return f"{type(exc).__name__}: {text}"[:400] if text else type(exc).__name__


def weights_only_line(exc: BaseException) -> str:
    """The line of a weights-only refusal that names the culprit (else its first line)."""
    for line in _ANSI.sub("", str(exc)).splitlines():
        if "WeightsUnpickler error" in line:  # drop torch's advice that follows the culprit
            return line.strip().split(" Please use ")[0][:400]
    return one_line(exc)


# -- loading -------------------------------------------------------------------------------------


def load_files(torch: Any, files: list[str], opts: dict[str, Any]) -> dict[str, Any]:
    """Load each file in turn (shards of one model), merging their state dicts."""
    info: dict[str, Any] = {"shapes": {}, "corrupt": False, "load_error": None,
                            "weights_only_failed": False, "weights_only_error": None,
                            "loaded_with_pickle": False}
    start = time.monotonic()
    for index, path in enumerate(files):
        if os.path.isdir(path):  # torch.distributed.checkpoint: one directory per checkpoint
            load_dcp(torch, path, opts, info)
            break
        obj = load_one(torch, path, opts, info)
        if obj is None:
            break
        if index == 0:
            info.update(describe_top(torch, obj))
        key, state = find_state_dict(torch, obj)
        if index == 0:
            info["state_dict_key"] = key
        info["shapes"].update(tensor_shapes(torch, state))
        del obj, state
    info["load_s"] = round(time.monotonic() - start, 3)
    return info


def load_one(torch: Any, path: str, opts: dict[str, Any], info: dict[str, Any]) -> Any:
    """The loaded object, or None with the failure recorded in `info`."""
    try:
        return torch_load(torch, path, bool(opts.get("weights_only", True)))
    except WeightsOnlyFailed as exc:
        info["weights_only_failed"] = True
        info["weights_only_error"] = weights_only_line(exc.__cause__ or exc)
        if not opts.get("allow_pickle"):
            return None
    except Exception as exc:
        return _failed(info, path, exc)
    try:
        obj = torch_load(torch, path, False)
    except Exception as exc:
        return _failed(info, path, exc)
    info["loaded_with_pickle"] = True
    return obj


def _failed(info: dict[str, Any], path: str, exc: BaseException) -> None:
    line = one_line(exc)
    info["load_error"] = f"{os.path.basename(path)}: {line}"
    info["corrupt"] = isinstance(exc, EOFError) or any(hint in line for hint in _CORRUPT_HINTS)
    return None


def torch_load(torch: Any, path: str, weights_only: bool) -> Any:
    """torch.load on the CPU, memory-mapped when the file is a zip and this torch can."""
    kwargs: dict[str, Any] = {"map_location": "cpu", "weights_only": weights_only}
    if zipfile.is_zipfile(path):
        kwargs["mmap"] = True
    while True:
        try:
            return torch.load(path, **kwargs)
        except TypeError as exc:  # an older torch: mmap needs 2.1, weights_only 1.13
            dropped = _drop_unsupported(exc, kwargs)
            if dropped is None:
                raise
            if dropped == "weights_only" and weights_only:
                raise WeightsOnlyFailed(f"torch {torch.__version__} has no weights_only") from exc
        except pickle.UnpicklingError as exc:
            if weights_only and "eights" in str(exc):  # "Weights only load failed", "WeightsUnpickler"
                raise WeightsOnlyFailed(str(exc)) from exc
            raise


def _drop_unsupported(exc: TypeError, kwargs: dict[str, Any]) -> str | None:
    for name in ("mmap", "weights_only"):
        if name in kwargs and f"'{name}'" in str(exc):
            kwargs.pop(name)
            return name
    return None


# -- torch.distributed.checkpoint (DCP): keys and shapes from .metadata, no tensor data read --------


class DcpMetadataUnpickler(pickle.Unpickler):
    """Unpickles a DCP .metadata file allowing only what DCP itself writes there (weights_only)."""

    SAFE = {("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
            ("torch.serialization", "_get_layout"), ("torch", "Size"), ("collections", "OrderedDict")}
    PATHS = ("PosixPath", "PurePosixPath", "WindowsPath", "PureWindowsPath")

    def __init__(self, file: Any, torch: Any) -> None:
        super().__init__(file)
        self.torch = torch

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self.SAFE or (module in ("pathlib", "pathlib._local") and name in self.PATHS):
            return super().find_class(module, name)
        if module == "torch" and isinstance(getattr(self.torch, name, None), self.torch.dtype):
            return getattr(self.torch, name)
        if module == "torch.distributed.checkpoint.metadata":
            found = super().find_class(module, name)
            if isinstance(found, type) and found.__module__ == module:
                return found
        raise pickle.UnpicklingError(f"WeightsUnpickler error: Unsupported global: GLOBAL {module}.{name}")


def read_dcp_metadata(torch: Any, directory: str, weights_only: bool) -> Any:
    with open(os.path.join(directory, ".metadata"), "rb") as f:
        if not weights_only:
            return pickle.load(f)
        try:
            return DcpMetadataUnpickler(f, torch).load()
        except pickle.UnpicklingError as exc:
            if "WeightsUnpickler" in str(exc):
                raise WeightsOnlyFailed(str(exc)) from exc
            raise


def load_dcp(torch: Any, directory: str, opts: dict[str, Any], info: dict[str, Any]) -> None:
    """Fill `info` from a DCP directory's .metadata (keys, shapes, what the state holds)."""
    try:
        metadata = read_dcp_metadata(torch, directory, bool(opts.get("weights_only", True)))
    except WeightsOnlyFailed as exc:
        info["weights_only_failed"] = True
        info["weights_only_error"] = weights_only_line(exc)
        if not opts.get("allow_pickle"):
            return
        try:
            metadata = read_dcp_metadata(torch, directory, False)
        except Exception as inner:
            _failed(info, os.path.join(directory, ".metadata"), inner)
            return
        info["loaded_with_pickle"] = True
    except Exception as exc:
        _failed(info, os.path.join(directory, ".metadata"), exc)
        return
    info.update(describe_dcp(getattr(metadata, "state_dict_metadata", {})))


def describe_dcp(entries: Mapping[str, Any]) -> dict[str, Any]:
    """DCP flattens nested state with dots: {"model": {...}, "optimizer": ...} -> "model.w", ..."""
    tops = list(dict.fromkeys(str(k).split(".")[0] for k in entries))
    shapes = {str(k): [int(d) for d in v.size] for k, v in entries.items() if hasattr(v, "chunks")}
    if "model" in tops:
        key = "model"
        shapes = {k[len("model."):]: v for k, v in shapes.items() if k.startswith("model.")}
    else:  # torchtitan: model keys at the top, next to "optimizer", "lr_scheduler", "train_state"
        key = ""
        shapes = {k: v for k, v in shapes.items() if k.split(".")[0] not in RESERVED_KEYS}
    has = {name: any(k in tops for k in names) for name, names in HAS_KEYS.items()}
    return {"top_level_keys": tops[:_MAX_TOP_KEYS], "top_level_count": len(tops), "has": has,
            "step_value": None, "state_dict_key": key, "shapes": shapes}


# -- describing ----------------------------------------------------------------------------------


def describe_top(torch: Any, obj: Any) -> dict[str, Any]:
    """Top-level keys, which resume state is present, and the step it was saved at."""
    keys = [str(k) for k in obj] if isinstance(obj, Mapping) else []
    present = set(keys) if isinstance(obj, Mapping) else set()
    has = {name: any(k in present and obj[k] is not None for k in names)
           for name, names in HAS_KEYS.items()}
    step = None
    for name in HAS_KEYS["step"]:
        if name in present:
            step = scalar(torch, obj[name])
            if step is not None:
                break
    return {"top_level_keys": keys[:_MAX_TOP_KEYS], "top_level_count": len(keys),
            "object_type": type(obj).__name__, "has": has, "step_value": step}


def scalar(torch: Any, value: Any) -> Any:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.item()
    if type(value).__module__ == "numpy" and getattr(value, "size", None) == 1:  # np.int64(7)
        return value.item()
    return None


def find_state_dict(torch: Any, obj: Any) -> tuple[str | None, Mapping[str, Any]]:
    """(key holding the model weights, "" when obj is the state dict, None when not found; weights)."""
    if isinstance(obj, torch.nn.Module):
        return "", obj.state_dict()
    if not isinstance(obj, Mapping):
        return None, {}
    reserved = any(str(k) in RESERVED_KEYS for k in obj)  # {"model": ..., "rng_state": tensor}
    if not reserved and looks_like_state_dict(torch, obj):
        return "", obj
    for name in MODEL_KEYS:
        state = as_state_dict(torch, obj.get(name))
        if state:
            return name, state
    found, largest = _largest_mapping(torch, obj)
    if found is None and looks_like_state_dict(torch, obj):  # a state dict with a buffer named "step"
        return "", obj
    return found, largest


def looks_like_state_dict(torch: Any, obj: Mapping[str, Any]) -> bool:
    tensors = sum(1 for v in obj.values() if isinstance(v, torch.Tensor))
    return tensors > 0 and tensors * 2 >= len(obj)


def as_state_dict(torch: Any, value: Any) -> Mapping[str, Any] | None:
    if isinstance(value, torch.nn.Module):
        return value.state_dict()
    if isinstance(value, Mapping) and tensor_shapes(torch, value):
        return value
    return None


def _largest_mapping(torch: Any, obj: Mapping[str, Any]) -> tuple[str | None, Mapping[str, Any]]:
    """Fallback for unusual layouts ("net", "ema"...): the non-resume entry holding most tensors."""
    skip = RESERVED_KEYS.difference(MODEL_KEYS)
    best: tuple[str | None, Mapping[str, Any]] = (None, {})
    best_count = 0
    for key, value in obj.items():
        if str(key) in skip:
            continue
        state = as_state_dict(torch, value)
        count = len(tensor_shapes(torch, state)) if state else 0
        if count > best_count:
            best, best_count = (str(key), state or {}), count
    return best


def tensor_shapes(torch: Any, state: Any, prefix: str = "", depth: int = 0) -> dict[str, list[int]]:
    """{dotted key: shape} for every tensor in a (possibly nested) state dict."""
    shapes: dict[str, list[int]] = {}
    if not isinstance(state, Mapping) or depth > _MAX_DEPTH:
        return shapes
    for key, value in state.items():
        name = prefix + str(key)
        if isinstance(value, torch.Tensor):
            shapes[name] = [int(d) for d in value.shape]
        elif isinstance(value, Mapping):
            shapes.update(tensor_shapes(torch, value, name + ".", depth + 1))
    return shapes


# -- a reference model built from code -----------------------------------------------------------


def build_reference(torch: Any, reference: dict[str, Any]) -> dict[str, Any]:
    """Import `module:attr`, call it with kwargs, and take its state dict's keys and shapes."""
    start = time.monotonic()
    info: dict[str, Any] = {"shapes": {}, "load_error": None}
    try:
        factory = import_target(reference["target"], reference.get("pythonpath") or "")
        built = build(torch, factory, reference.get("kwargs") or {})
        key, state = find_state_dict(torch, built)
        if key is None:
            info["load_error"] = f"{reference['target']} returned a {type(built).__name__}, not a model"
        info["shapes"] = tensor_shapes(torch, state)
    except Exception as exc:  # the user's code: any failure is part of the answer
        info["load_error"] = one_line(exc)
    info["load_s"] = round(time.monotonic() - start, 3)
    return info


def import_target(target: str, pythonpath: str) -> Any:
    for entry in reversed([p for p in pythonpath.split(os.pathsep) if p]):
        sys.path.insert(0, entry)
    module_name, _, attr = target.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def build(torch: Any, factory: Any, kwargs: dict[str, Any]) -> Any:
    """Build on the meta device (shapes without memory) when this torch can, else on the CPU."""
    try:
        with torch.device("meta"):
            return factory(**kwargs)
    except Exception:  # torch < 2.0, or model code that needs real data while being built
        return factory(**kwargs)


if __name__ == "__main__":
    main()
