"""Zero-element tensors in a checkpoint, and the DeepSpeed ZeRO folder saved beside it.

A ZeRO-3 model's parameters are partitioned: every rank holds a flat shard and the module keeps
a placeholder of `torch.Size([0])`. A state dict taken without gathering (`save_pretrained`,
`torch.save(model.state_dict())`, `stage3_gather_16bit_weights_on_model_save: false`) saves
those placeholders. The full weights then live only in the ZeRO checkpoint folder
(`global_stepN/` with `*_model_states.pt` and `zero_pp_rank_*_optim_states.pt`), which
DeepSpeed's `zero_to_fp32.py` consolidates. Standard library only.
"""

from __future__ import annotations

import os
import re
from typing import Any

from runbook.checks.files import _torch_pickle

_SAMPLE = 10
_MAX_ENTRIES = 2000  # directory entries looked at while searching for the ZeRO folder
_OPTIM = re.compile(r"^(?:bf16_)?zero_pp_rank_\d+_mp_rank_\d+_optim_states\.pt$")
_MODEL = re.compile(r"^(?:zero_pp_rank_\d+_)?mp_rank_\d+_model_states\.pt$")


def stdlib_shapes(files: list[str], safetensors: dict[str, list[int]] | None) -> dict[str, list[int]] | None:
    """{key: shape} without torch: safetensors headers, or torch zips' data.pkl (None if neither)."""
    if safetensors is not None:
        return safetensors
    shapes: dict[str, list[int]] = {}
    for path in files:
        if os.path.isdir(path):
            return None
        try:
            shapes.update(_torch_pickle.zip_tensor_shapes(path))
        except _torch_pickle.PickleScanError:
            return None
    return shapes


def zero_size_fields(shapes: dict[str, list[int]] | None) -> dict[str, Any]:
    if not shapes:
        return {}
    empty = [key for key, shape in shapes.items() if 0 in shape]
    return {"zero_size_count": len(empty), "zero_size_keys": empty[:_SAMPLE], "tensors_scanned": len(shapes)}


def find_zero_folder(target: str) -> dict[str, Any] | None:
    """The newest folder holding ZeRO shards, searched from the checkpoint's directory down two levels."""
    base = target if os.path.isdir(target) else os.path.dirname(target) or "."
    found: list[tuple[float, str, list[str]]] = []
    seen = 0
    for directory, _depth in _walk(base):
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        seen += len(names)
        if any(_OPTIM.match(n) or _MODEL.match(n) for n in names):
            found.append((_mtime(directory), directory, names))
        if seen > _MAX_ENTRIES:
            break
    if not found:
        return None
    _, directory, names = max(found)
    parent = os.path.dirname(directory)
    script = next((os.path.join(d, "zero_to_fp32.py") for d in (parent, directory, base)
                   if os.path.isfile(os.path.join(d, "zero_to_fp32.py"))), None)
    return {"dir": directory, "tag": os.path.basename(directory),
            "optim_states": sum(1 for n in names if _OPTIM.match(n)),
            "model_states": sum(1 for n in names if _MODEL.match(n)),
            "zero_to_fp32": script}


def _walk(base: str) -> list[tuple[str, int]]:
    """base, its subdirectories and theirs (two levels), subdirectories in name order."""
    order = [(base, 0)]
    index = 0
    while index < len(order) and len(order) < _MAX_ENTRIES:
        directory, depth = order[index]
        index += 1
        if depth >= 2:
            continue
        try:
            subs = sorted(n for n in os.listdir(directory) if os.path.isdir(os.path.join(directory, n)))
        except OSError:
            continue
        order.extend((os.path.join(directory, n), depth + 1) for n in subs)
    return order


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0
