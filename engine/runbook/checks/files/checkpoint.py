"""`checkpoint`: what a checkpoint holds (weights, optimizer, scheduler, RNG, step); does it fit a model.

The probe itself stays stdlib-only: safetensors headers and zip directories are read here, and
torch runs in a child of the node's Python (`_checkpoint_worker`, under the check's deadline), so a
huge file or a hanging import costs one killed child. Keys are compared here, from key -> shape maps.
"""

from __future__ import annotations

import glob
import json
import os
import re
import time
import zipfile
from dataclasses import dataclass, field
from typing import Any

from runbook.checks._subpython import run_worker
from runbook.checks.base import CheckContext
from runbook.checks.files import _checkpoint_worker, _zero_layout

NAME = "checkpoint"
SUMMARY = {
    "en": "Checkpoint contents: weights, optimizer/scheduler/RNG/step, corruption, key match to a model",
    "zh": "检查点内容：模型权重、优化器/调度器/随机数状态/步数、是否损坏、键是否与模型匹配",
}
PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "minLength": 1,
                 "description": "Checkpoint file, directory (model.pt, optimizer.pt...) or glob "
                                "(newest wins)"},
        "reference": {"type": "string", "minLength": 1,
                      "description": "Compare keys with another checkpoint path, or `module:callable` "
                                     "that builds the model"},
        "reference_kwargs": {"type": "object",
                             "description": "Keyword arguments for the reference callable"},
        "pythonpath": {"type": "string",
                       "description": "Directories (os.pathsep-separated) put on sys.path for the reference"},
        "weights_only": {"type": "boolean", "default": True,
                         "description": "torch.load(weights_only=...): True refuses pickled code"},
        "allow_pickle": {"type": "boolean", "default": False,
                         "description": "Retry with weights_only=False when the safe load fails "
                                        "(trusted files only)"},
        "python": {"type": "string", "minLength": 1,
                   "description": "Interpreter that loads the file with torch (default: the probe's own)"},
    },
    "required": ["path"],
    "additionalProperties": False,
}
_HAS = "{optimizer, scheduler, rng, step}"
RESULT_FIELDS = {
    "available": {"type": "boolean",
                  "en": "The check could examine the checkpoint (false: torch missing or its worker failed)",
                  "zh": "检查得以进行（false：没有 torch 或加载子进程失败）"},
    "reason": {"type": "string", "en": "Why the result is missing or incomplete (null when fine)",
               "zh": "结果缺失或不完整的原因（正常时为 null）"},
    "exists": {"type": "boolean", "en": "Something matches path", "zh": "path 匹配到了文件或目录"},
    "path": {"type": "string", "en": "The file or directory examined (newest glob match)",
             "zh": "实际检查的文件或目录（glob 时取最新的）"},
    "files": {"type": "array", "en": "The weight files loaded (one, or the shards of one model)",
              "zh": "加载的权重文件（一个，或同一模型的各个分片）"},
    "size_bytes": {"type": "integer", "en": "Total size of the weight files", "zh": "权重文件总大小（字节）"},
    "age_s": {"type": "number", "en": "Seconds since the newest weight file was modified",
              "zh": "距权重文件最近一次修改的秒数"},
    "load_s": {"type": "number", "en": "Seconds spent reading the weights (torch.load or headers)",
               "zh": "读取权重所用秒数（torch.load 或读取文件头）"},
    "format": {"type": "string", "en": "torch | safetensors | dcp (torch.distributed.checkpoint) | unknown",
               "zh": "torch | safetensors | dcp（torch.distributed.checkpoint）| unknown（未知）"},
    "torch_version": {"type": "string", "en": "torch version of the loading Python (null if unused)",
                      "zh": "加载所用 Python 中 torch 的版本（未用到时为 null）"},
    "corrupt": {"type": "boolean", "en": "The file is truncated or unreadable (e.g. partially written)",
                "zh": "文件被截断或无法读取（例如写了一半）"},
    "load_error": {"type": "string", "en": "First line of the load error (null when loaded)",
                   "zh": "加载错误的第一行（加载成功时为 null）"},
    "weights_only_failed": {"type": "boolean",
                            "en": "torch.load(weights_only=True) refused the file (it pickles objects)",
                            "zh": "torch.load(weights_only=True) 拒绝加载（文件中含有 pickle 对象）"},
    "weights_only_error": {"type": "string", "en": "The line naming what weights_only refused",
                           "zh": "weights_only 拒绝加载的具体原因那一行"},
    "loaded_with_pickle": {"type": "boolean", "en": "Loaded with weights_only=False (allow_pickle)",
                           "zh": "通过 weights_only=False 加载（allow_pickle）"},
    "top_level_keys": {"type": "array", "en": "Keys of the saved dict (at most 50)",
                       "zh": "保存的 dict 的顶层键（最多 50 个）"},
    "state_dict_key": {"type": "string",
                       "en": "Key holding the model weights (model, state_dict...); \"\" when the file is "
                             "the state dict; null when none found",
                       "zh": "存放模型权重的键（model、state_dict 等）；文件本身就是 state dict 时为 \"\"；"
                             "找不到时为 null"},
    "has": {"type": "object", "en": f"Resume state present: {_HAS} (directory siblings count too)",
            "zh": f"是否包含续训所需状态：{_HAS}（目录中的同级文件也算）"},
    "step_value": {"type": "number", "en": "Saved step/global_step/iteration/epoch (null if none)",
                   "zh": "保存的 step/global_step/iteration/epoch（没有时为 null）"},
    "incomplete_resume": {"type": "boolean",
                          "en": "Weights present but optimizer, scheduler, RNG or step missing (weights-only "
                                "resume)",
                          "zh": "有模型权重，但缺少优化器、调度器、随机数状态或步数（只能恢复权重）"},
    "num_tensors": {"type": "integer", "en": "Tensors in the model state dict",
                    "zh": "模型 state dict 中的张量数"},
    "num_params": {"type": "integer", "en": "Elements in those tensors", "zh": "这些张量的元素总数"},
    "key_sample": {"type": "array", "en": "The first 10 weight keys", "zh": "前 10 个权重键"},
    "prefixes": {"type": "array", "en": "Wrapper prefixes every key carries: module., _orig_mod., model.",
                 "zh": "所有键都带的包装前缀：module.、_orig_mod.、model."},
    "reference_error": {"type": "string", "en": "Why the reference could not be read or built (or null)",
                        "zh": "参照（检查点或模型）无法读取或构建的原因（或 null）"},
    "missing_keys": {"type": "array", "en": "Reference keys absent from the checkpoint (at most 50)",
                     "zh": "参照中有、检查点中没有的键（最多 50 个）"},
    "unexpected_keys": {"type": "array", "en": "Checkpoint keys absent from the reference (at most 50)",
                        "zh": "检查点中有、参照中没有的键（最多 50 个）"},
    "missing_count": {"type": "integer", "en": "Number of missing keys", "zh": "缺失键的数量"},
    "unexpected_count": {"type": "integer", "en": "Number of unexpected keys", "zh": "多余键的数量"},
    "shape_mismatches": {"type": "array", "en": "Same key, different shape: {key, checkpoint, reference} (at "
                                                "most 50)",
                         "zh": "键相同但形状不同：{key, checkpoint, reference}（最多 50 个）"},
    "explained_by_prefix": {"type": "string",
                            "en": "Prefix whose stripping/adding makes the key sets equal (module. = DDP, "
                                  "_orig_mod. = torch.compile), or null",
                            "zh": "去掉或加上该前缀后键集合一致（module. 来自 DDP，_orig_mod. 来自 "
                                  "torch.compile），否则为 null"},
    "prefix_on": {"type": "string", "en": "Which side carries that prefix: checkpoint | reference",
                  "zh": "前缀出现在哪一侧：checkpoint | reference"},
    "matches": {"type": "boolean", "en": "Keys and shapes equal the reference's (null without reference)",
                "zh": "键和形状与参照完全一致（没有参照时为 null）"},
    "tensors_scanned": {"type": "integer",
                        "en": "Tensors whose shapes were read for zero_size_count (safetensors header or "
                              "the torch zip's data.pkl opcodes, never unpickled; else torch's load)",
                        "zh": "为统计 zero_size_count 读取了形状的张量数（safetensors 头，或 torch zip 中 "
                              "data.pkl 的操作码，从不反序列化；否则用 torch 加载的结果）"},
    "zero_size_count": {"type": "integer",
                        "en": "Weight tensors with zero elements (torch.Size([0]): a ZeRO-3 placeholder "
                              "saved without gathering)",
                        "zh": "元素个数为 0 的权重张量数（torch.Size([0])：未聚合就保存的 ZeRO-3 占位张量）"},
    "zero_size_keys": {"type": "array", "en": "The first 10 of those keys", "zh": "这些键中的前 10 个"},
    "zero_checkpoint": {"type": "object",
                        "en": "The newest DeepSpeed ZeRO folder near the checkpoint: {dir, tag, "
                              "model_states, optim_states, zero_to_fp32} (null if none)",
                        "zh": "检查点附近最新的 DeepSpeed ZeRO 目录：{dir, tag, model_states, "
                              "optim_states, zero_to_fp32}（没有时为 null）"},
}
DEFAULT_TIMEOUT = 120.0

WEIGHT_EXTS = (".safetensors", ".pt", ".pth", ".bin", ".ckpt", ".tar")
MODEL_FILES = (
    "model.safetensors", "model.pt", "model.pth", "pytorch_model.bin", "model.bin", "checkpoint.pt",
    "checkpoint.pth", "ckpt.pt", "last.ckpt", "model_optim_rng.pt", "mp_rank_00_model_states.pt",
    "consolidated.00.pth",
)
_SHARD = re.compile(r"^(model|pytorch_model)-\d+-of-\d+\.(safetensors|bin)$")
_SIDE_WORDS = {"optimizer": ("optim",), "scheduler": ("sched",), "rng": ("rng",)}
WRAPPER_PREFIXES = ("module.", "_orig_mod.", "model.")
_EXPLAIN_PREFIXES = ("module.", "_orig_mod.", "model.", "module._orig_mod.", "_orig_mod.module.")
_IMPORT_TARGET = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
HAS_NAMES = ("optimizer", "scheduler", "rng", "step")
_LIST_MAX = 50
_SAMPLE = 10
_HEADER_MAX = 100 * 1024 * 1024


@dataclass
class Plan:
    """What to read for one checkpoint path: weight files plus what their directory says."""

    target: str
    files: list[str] = field(default_factory=list)
    has: dict[str, bool] = field(default_factory=dict)
    step_value: Any = None


@dataclass
class Local:
    """What the standard library alone could tell about the weight files."""

    format: str = "unknown"
    corrupt_error: str | None = None
    shapes: dict[str, list[int]] | None = None  # set when every file is safetensors
    load_s: float = 0.0


def run(params: dict[str, Any], ctx: CheckContext) -> dict[str, Any]:
    raw = os.path.expanduser(str(params["path"]))
    result = _blank()
    target = resolve(raw)
    if target is None:
        return {**result, "exists": False, "reason": f"nothing matches {raw}"}
    plan = plan_checkpoint(target)
    result.update(_file_fields(plan))
    if not plan.files:
        return {**result, "reason": f"no weight file ({', '.join(WEIGHT_EXTS)}) in {target}"}
    local = inspect_local(plan.files)
    result["format"] = local.format
    if local.corrupt_error:
        return {**result, "corrupt": True, "load_error": local.corrupt_error,
                "reason": f"corrupt: {local.corrupt_error}"}
    # Read without torch, so a node without it still sees ZeRO-3's empty placeholders.
    stdlib_shapes = _zero_layout.stdlib_shapes(plan.files, local.shapes)
    result.update(_zero_layout.zero_size_fields(stdlib_shapes))
    result["zero_checkpoint"] = _zero_layout.find_zero_folder(plan.target)
    reference, ref_shapes, ref_error = plan_reference(params)
    answer: dict[str, Any] = {}
    if local.shapes is None or (reference and ref_shapes is None and ref_error is None):
        answer, problem = _ask_worker(params, ctx, plan, local, reference)
        if problem is not None and local.shapes is None:
            return {**result, **problem}
        if problem is not None:  # the weights were read here; only the reference needed torch
            result["timed_out"] = bool(problem.get("timed_out"))
            ref_error = f"reference: {problem['reason']}"
    checkpoint = answer.get("checkpoint") or _local_view(local)
    result.update(_describe(plan, checkpoint, answer.get("torch_version")))
    if not stdlib_shapes:  # a legacy (non-zip) file, or a pickled module: the shapes torch loaded
        result.update(_zero_layout.zero_size_fields(checkpoint["shapes"]))
    if reference is not None and checkpoint["shapes"]:
        ref = answer.get("reference") or {}
        ref_error = ref_error or ref.get("load_error") or ref.get("weights_only_error")
        result.update(_reference_fields(checkpoint["shapes"], ref_shapes or ref.get("shapes"), ref_error))
    return result


def _blank() -> dict[str, Any]:
    """Every documented field, so trees can always branch on them."""
    blank: dict[str, Any] = {name: None for name in RESULT_FIELDS}
    blank.update(available=True, exists=True, corrupt=False, weights_only_failed=False,
                 loaded_with_pickle=False, files=[], top_level_keys=[], key_sample=[], prefixes=[],
                 zero_size_count=0, zero_size_keys=[], tensors_scanned=0,
                 has={name: False for name in HAS_NAMES})
    return blank


# -- finding the files ---------------------------------------------------------------------------


def resolve(path: str) -> str | None:
    """The path itself, or the most recently modified glob match."""
    if not glob.has_magic(path):
        return path if os.path.exists(path) else None
    matches = [(_mtime(m), m) for m in glob.glob(path)]
    return max(matches)[1] if matches else None


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def plan_checkpoint(target: str) -> Plan:
    if not os.path.isdir(target):
        return Plan(target, [target])
    plan = _plan_dir(target)
    if not plan.files:  # e.g. Megatron's iter_0001000/mp_rank_00/model_optim_rng.pt
        for sub in sorted(os.listdir(target)):
            inner = os.path.join(target, sub)
            if os.path.isdir(inner) and _plan_dir(inner).files:
                return _plan_dir(inner)
    return plan


def _plan_dir(directory: str) -> Plan:
    try:
        names = sorted(n for n in os.listdir(directory) if os.path.isfile(os.path.join(directory, n)))
    except OSError:
        return Plan(directory)
    if ".metadata" in names or any(n.endswith(".distcp") for n in names):
        return Plan(directory, [directory])  # torch.distributed.checkpoint: the directory is the unit
    chosen = _model_files(directory, names)
    plan = Plan(directory, [os.path.join(directory, n) for n in chosen])
    others = [n.lower() for n in names if n not in chosen]
    plan.has = {side: any(w in n for n in others for w in words) for side, words in _SIDE_WORDS.items()}
    plan.step_value = _trainer_state_step(directory, names)
    plan.has["step"] = plan.step_value is not None
    return plan


def _model_files(directory: str, names: list[str]) -> list[str]:
    for name in MODEL_FILES:
        if name in names:
            return [name]
    shards = [n for n in names if _SHARD.match(n)]
    if shards:
        return shards
    weights = [n for n in names if n.lower().endswith(WEIGHT_EXTS)
               and not any(w in n.lower() for words in _SIDE_WORDS.values() for w in words)]
    if not weights:
        return []
    return [max(weights, key=lambda n: os.path.getsize(os.path.join(directory, n)))]


def _trainer_state_step(directory: str, names: list[str]) -> Any:
    """global_step from a HuggingFace Trainer checkpoint's trainer_state.json (None if absent)."""
    if "trainer_state.json" not in names:
        return None
    try:
        with open(os.path.join(directory, "trainer_state.json"), encoding="utf-8") as f:
            return json.load(f).get("global_step")
    except (OSError, ValueError, AttributeError):
        return None


def _file_fields(plan: Plan) -> dict[str, Any]:
    paths: list[str] = []
    for name in plan.files:
        paths.extend(_dir_files(name) if os.path.isdir(name) else [name])
    stats = [os.stat(f) for f in paths if os.path.exists(f)]
    now = time.time()
    return {
        "path": plan.target,
        "files": plan.files[:_LIST_MAX],
        "size_bytes": sum(s.st_size for s in stats),
        "age_s": round(now - max(s.st_mtime for s in stats), 3) if stats else None,
    }


def _dir_files(directory: str) -> list[str]:
    try:
        names = [os.path.join(directory, n) for n in os.listdir(directory)]
    except OSError:
        return []
    return [n for n in names if os.path.isfile(n)]


# -- what the standard library can read ----------------------------------------------------------


def inspect_local(files: list[str]) -> Local:
    """Format, truncation and (for safetensors) the key -> shape map, without torch."""
    start = time.monotonic()
    local = Local()
    shapes: dict[str, list[int]] = {}
    for path in files:
        fmt, error, file_shapes = sniff(path)
        local.format = fmt if local.format == "unknown" else local.format
        if error:
            local.corrupt_error = f"{os.path.basename(path)}: {error}"
            return local
        if file_shapes is None:
            return local
        shapes.update(file_shapes)
    local.shapes = shapes
    local.load_s = round(time.monotonic() - start, 3)
    return local


def sniff(path: str) -> tuple[str, str | None, dict[str, list[int]] | None]:
    """(format, corruption found or None, shapes when read from a safetensors header)."""
    if os.path.isdir(path):
        return "dcp", _check_dcp(path), None
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            magic = f.read(8)
    except OSError as exc:
        return "unknown", f"cannot read: {exc}", None
    if size == 0:
        return "unknown", "empty file (0 bytes)", None
    if path.endswith(".safetensors"):
        shapes, error = safetensors_shapes(path, size)
        return "safetensors", error, shapes
    if magic[:4] == b"PK\x03\x04":
        return _sniff_zip(path)
    return ("torch" if magic[:1] == b"\x80" else "unknown"), None, None


def _check_dcp(directory: str) -> str | None:
    """A DCP save writes .metadata last, after every rank's .distcp files: without it, it never finished."""
    meta = os.path.join(directory, ".metadata")
    if not os.path.isfile(meta):
        return "no .metadata (DCP writes it last): the save did not finish"
    if os.path.getsize(meta) == 0:
        return ".metadata is empty (0 bytes): partially written"
    return None


def _sniff_zip(path: str) -> tuple[str, str | None, None]:
    """torch.save's zip format: the central directory is written last, so no directory = cut short."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        return "torch", f"truncated or corrupt zip archive ({exc}); partially written?", None
    return ("torch" if any(n.endswith("data.pkl") for n in names) else "unknown"), None, None


def safetensors_shapes(path: str, size: int) -> tuple[dict[str, list[int]] | None, str | None]:
    """{key: shape} from a safetensors header (8-byte length + JSON), checking the data is all there."""
    try:
        with open(path, "rb") as f:
            length = int.from_bytes(f.read(8), "little")
            if length > min(size - 8, _HEADER_MAX):
                return None, f"header length {length} exceeds the file ({size} bytes); partially written?"
            header = json.loads(f.read(length))
    except (OSError, ValueError) as exc:
        return None, f"unreadable safetensors header ({exc})"
    if not isinstance(header, dict):
        return None, "unreadable safetensors header (not an object)"
    header.pop("__metadata__", None)
    try:
        end = max((int(v["data_offsets"][1]) for v in header.values()), default=0)
        shapes = {str(k): [int(d) for d in v["shape"]] for k, v in header.items()}
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        return None, f"unreadable safetensors header ({exc})"
    if 8 + length + end > size:
        return None, f"truncated: tensors need {8 + length + end} bytes, the file has {size}"
    return shapes, None


def _local_view(local: Local) -> dict[str, Any]:
    return {"shapes": local.shapes or {}, "load_s": local.load_s, "state_dict_key": "",
            "top_level_keys": [], "has": {}, "step_value": None}


# -- the reference -------------------------------------------------------------------------------


def plan_reference(
    params: dict[str, Any],
) -> tuple[dict[str, Any] | None, dict[str, list[int]] | None, str | None]:
    """(worker payload part, shapes already read here, error) for params.reference."""
    raw = params.get("reference")
    if not raw:
        return None, None, None
    raw = os.path.expanduser(str(raw))
    if _IMPORT_TARGET.match(raw) and not os.path.exists(raw):
        return {"target": raw, "kwargs": params.get("reference_kwargs") or {},
                "pythonpath": params.get("pythonpath") or ""}, None, None
    target = resolve(raw)
    if target is None:
        return {}, None, f"reference: nothing matches {raw}"
    files = plan_checkpoint(target).files
    if not files:
        return {}, None, f"reference: no weight file in {target}"
    local = inspect_local(files)
    if local.corrupt_error:
        return {}, None, f"reference: {local.corrupt_error}"
    return {"files": files}, local.shapes, None


def _ask_worker(
    params: dict[str, Any], ctx: CheckContext, plan: Plan, local: Local, reference: dict[str, Any] | None,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(worker answer, None) or ({}, result fields saying why there is no answer)."""
    payload = {"files": plan.files if local.shapes is None else [],
               "weights_only": params.get("weights_only", True) is not False,
               "allow_pickle": bool(params.get("allow_pickle")), "reference": reference}
    outcome = run_worker(ctx, _checkpoint_worker, payload, params.get("python"), needs="torch")
    if outcome.timed_out:
        return {}, {"timed_out": True, "reason": f"loading with torch: {outcome.error}"}
    data = outcome.data or {}
    if data.get("missing"):
        why = f"torch not importable by {outcome.python}: {data['error']}"
        return {}, {"available": False, "reason": why}
    if outcome.error or data.get("error"):
        return {}, {"available": False, "reason": f"torch worker failed: {outcome.error or data['error']}"}
    return data, None


# -- assembling the result -----------------------------------------------------------------------


def _describe(plan: Plan, loaded: dict[str, Any], torch_version: str | None) -> dict[str, Any]:
    shapes: dict[str, list[int]] = loaded.get("shapes") or {}
    loaded_has = loaded.get("has") or {}
    has = {name: bool(loaded_has.get(name) or plan.has.get(name)) for name in HAS_NAMES}
    step = loaded.get("step_value")
    fields = {
        "torch_version": torch_version,
        "load_s": loaded.get("load_s"),
        "top_level_keys": loaded.get("top_level_keys") or [],
        "state_dict_key": loaded.get("state_dict_key"),
        "has": has,
        "step_value": plan.step_value if step is None else step,
        "incomplete_resume": bool(shapes) and not all(has.values()),
        "num_tensors": len(shapes),
        "num_params": sum(_numel(s) for s in shapes.values()),
        "key_sample": list(shapes)[:_SAMPLE],
        "prefixes": common_prefixes(list(shapes)),
    }
    for name in ("corrupt", "load_error", "weights_only_failed", "weights_only_error", "loaded_with_pickle"):
        if name in loaded:
            fields[name] = loaded[name]
    if loaded.get("load_error"):
        fields["reason"] = f"load failed: {loaded['load_error']}"
    elif loaded.get("weights_only_failed") and not loaded.get("loaded_with_pickle"):
        fields["reason"] = "weights_only=True refused the file; set allow_pickle to load it anyway"
    return fields


def _numel(shape: list[int]) -> int:
    count = 1
    for dim in shape:
        count *= dim
    return count


def common_prefixes(keys: list[str]) -> list[str]:
    """Wrapper prefixes that every key carries, outermost first ("module.", "_orig_mod.")."""
    found: list[str] = []
    while keys:
        prefix = next((p for p in WRAPPER_PREFIXES if all(k.startswith(p) for k in keys)), None)
        if prefix is None:
            break
        found.append(prefix)
        keys = [k[len(prefix):] for k in keys]
    return found


def _reference_fields(
    checkpoint: dict[str, list[int]], reference: dict[str, list[int]] | None, error: str | None,
) -> dict[str, Any]:
    if error or reference is None:
        return {"reference_error": error or "reference gave no keys"}
    return {"reference_error": None, **compare(checkpoint, reference)}


def compare(checkpoint: dict[str, list[int]], reference: dict[str, list[int]]) -> dict[str, Any]:
    """Missing/unexpected keys, shape mismatches, and a wrapper prefix that explains the difference."""
    missing = [k for k in reference if k not in checkpoint]
    unexpected = [k for k in checkpoint if k not in reference]
    prefix, side = explain_by_prefix(set(checkpoint), set(reference))
    mapped = _strip(checkpoint, prefix) if side == "checkpoint" else checkpoint
    ref_mapped = _strip(reference, prefix) if side == "reference" else reference
    mismatches = [{"key": k, "checkpoint": shape, "reference": ref_mapped[k]}
                  for k, shape in mapped.items() if k in ref_mapped and ref_mapped[k] != shape]
    return {
        "missing_keys": missing[:_LIST_MAX], "missing_count": len(missing),
        "unexpected_keys": unexpected[:_LIST_MAX], "unexpected_count": len(unexpected),
        "shape_mismatches": mismatches[:_LIST_MAX],
        "explained_by_prefix": prefix, "prefix_on": side,
        "matches": not missing and not unexpected and not mismatches,
    }


def explain_by_prefix(checkpoint: set[str], reference: set[str]) -> tuple[str | None, str | None]:
    """(prefix, side carrying it) when stripping it from one side makes the key sets equal."""
    if checkpoint == reference or not checkpoint or not reference:
        return None, None
    for prefix in _EXPLAIN_PREFIXES:
        if set(_strip(dict.fromkeys(checkpoint), prefix)) == reference:
            return prefix, "checkpoint"
        if set(_strip(dict.fromkeys(reference), prefix)) == checkpoint:
            return prefix, "reference"
    return None, None


def _strip(mapping: dict[str, Any], prefix: str | None) -> dict[str, Any]:
    if not prefix:
        return mapping
    return {(k[len(prefix):] if k.startswith(prefix) else k): v for k, v in mapping.items()}
