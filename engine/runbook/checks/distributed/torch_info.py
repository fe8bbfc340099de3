"""`torch`: the node's torch build (version, CUDA, cuDNN, NCCL, GPUs) and the job's distributed env.

torch is imported in a child of the node's Python (`_torch_worker.py` via `_subpython`), never in
the probe: an import that hangs (a dead GPU driver, a slow network filesystem) or crashes costs
one killed child under the check's deadline. With `pid`, the child runs with the training
process's interpreter and its CUDA_VISIBLE_DEVICES / PYTHONPATH / LD_LIBRARY_PATH, and the
distributed variables are read from that process's environment (/proc/PID/environ).

world_size should equal num_nodes * gpus_per_node (seed 002's "DDP Misconfiguration: world_size
is X, but ... insufficient GPUs"); gpus_per_node defaults to the GPUs torch sees. visible_devices
counts the devices the job's CUDA_VISIBLE_DEVICES lists, which a runbook can compare with
LOCAL_WORLD_SIZE where torch sees no GPU at all (a CPU-only build, a broken driver).
"""

from __future__ import annotations

import os
import shutil
from typing import Any

from runbook.checks import _procfs
from runbook.checks._subpython import default_python, run_worker
from runbook.checks.base import CheckContext
from runbook.checks.distributed import _torch_worker
from runbook.checks.host import process

NAME = "torch"
SUMMARY = {
    "en": "torch on the node: version, CUDA, cuDNN, NCCL, GPUs torch sees, gloo/NCCL backends; the "
          "job's RANK/WORLD_SIZE/MASTER_* and whether world_size = num_nodes * gpus_per_node",
    "zh": "节点上的 torch：版本、CUDA、cuDNN、NCCL、torch 能看到的 GPU、gloo/NCCL 后端；任务的 "
          "RANK/WORLD_SIZE/MASTER_* 环境变量，以及 world_size 是否等于 num_nodes * gpus_per_node",
}
PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "gpus_per_node": {"type": ["integer", "string"],
                          "description": "GPUs (ranks) per node the job is meant to use (default: the "
                                         "GPUs torch sees, when any; \"\" means not given)"},
        "num_nodes": {"type": ["integer", "string"],
                      "description": "Nodes the job is meant to use (\"\" means not given)"},
        "pid": {"type": ["integer", "string"],
                "description": "Training process: read the distributed env from /proc/PID/environ and "
                               "use its interpreter (\"\" means the probe's own env and Python)"},
        "python": {"type": "string", "minLength": 1,
                   "description": "Interpreter that imports torch (default: the training process's "
                                  "with pid, else the probe's)"},
    },
    "additionalProperties": False,
}
DIST_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
# Variables of the training process that change what `import torch` finds and sees.
_IMPORT_VARS = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "PYTHONPATH", "LD_LIBRARY_PATH",
                "PYTHONHOME")
_NODE = "from torch on the node (a CPU-only build or a node without GPUs gives null/false/0)"
_NODE_ZH = "来自节点上的 torch（仅 CPU 的版本或没有 GPU 的节点为 null/false/0）"
RESULT_FIELDS = {
    "available": {"type": "boolean", "en": "torch could be imported by the node's Python",
                  "zh": "节点上的 Python 能导入 torch"},
    "reason": {"type": "string", "en": "Why torch could not be described (null when it was)",
               "zh": "无法获取 torch 信息的原因（成功时为 null）"},
    "python": {"type": "string", "en": "Interpreter that imported torch", "zh": "导入 torch 所用的解释器"},
    "import_s": {"type": "number", "en": "Seconds `import torch` took", "zh": "`import torch` 耗时（秒）"},
    "version": {"type": "string", "en": "torch.__version__ (e.g. 2.5.1+cu124)",
                "zh": "torch.__version__（如 2.5.1+cu124）"},
    "cuda": {"type": "string", "en": f"CUDA version torch was built with (torch.version.cuda), {_NODE}",
             "zh": f"torch 编译时的 CUDA 版本（torch.version.cuda），{_NODE_ZH}"},
    "cudnn": {"type": "integer", "en": f"cuDNN version (torch.backends.cudnn.version()), {_NODE}",
              "zh": f"cuDNN 版本（torch.backends.cudnn.version()），{_NODE_ZH}"},
    "cuda_available": {"type": "boolean", "en": f"torch.cuda.is_available(), {_NODE}",
                       "zh": f"torch.cuda.is_available()，{_NODE_ZH}"},
    "device_count": {"type": "integer",
                     "en": f"torch.cuda.device_count() under the job's CUDA_VISIBLE_DEVICES, {_NODE}",
                     "zh": f"在任务的 CUDA_VISIBLE_DEVICES 下 torch.cuda.device_count() 的值，{_NODE_ZH}"},
    "nccl_version": {"type": "string",
                     "en": f"NCCL version torch uses (torch.cuda.nccl.version(), as \"2.21.5\"), {_NODE}",
                     "zh": f"torch 使用的 NCCL 版本（torch.cuda.nccl.version()，形如 \"2.21.5\"），"
                           f"{_NODE_ZH}"},
    "gloo_available": {"type": "boolean", "en": "torch.distributed has the gloo backend",
                       "zh": "torch.distributed 支持 gloo 后端"},
    "nccl_available": {"type": "boolean", "en": "torch.distributed has the NCCL backend",
                       "zh": "torch.distributed 支持 NCCL 后端"},
    "env_source": {"type": "string",
                   "en": "Where the distributed env was read: \"pid N\" or \"probe\"",
                   "zh": "分布式环境变量的来源：\"pid N\" 或 \"probe\"（探针自身的环境）"},
    "env_error": {"type": "string",
                  "en": "Why the training process's environment could not be read (null when read)",
                  "zh": "无法读取训练进程环境变量的原因（读取成功时为 null）"},
    "distributed": {"type": "object",
                    "en": f"{{{', '.join(DIST_VARS)}}} as set (null when not set)",
                    "zh": f"{{{', '.join(DIST_VARS)}}} 的值（未设置时为 null）"},
    "visible_devices": {"type": "integer",
                        "en": "Devices the job's CUDA_VISIBLE_DEVICES lists, up to the first invalid "
                              "entry as CUDA reads it (\"-1\" and \"NoDevFiles\" give 0; null when unset)",
                        "zh": "任务的 CUDA_VISIBLE_DEVICES 中列出的设备数，按 CUDA 的方式读到第一个无效项为止"
                              "（\"-1\" 和 \"NoDevFiles\" 为 0；未设置时为 null）"},
    "world_size": {"type": "integer", "en": "WORLD_SIZE as a number (null when not set)",
                   "zh": "WORLD_SIZE 的数值（未设置时为 null）"},
    "gpus_per_node": {"type": "integer",
                      "en": "gpus_per_node used: the parameter, else device_count when > 0 (or null)",
                      "zh": "实际使用的 gpus_per_node：参数值，否则为大于 0 的 device_count（或 null）"},
    "expected_world_size": {"type": "integer",
                            "en": "num_nodes * gpus_per_node when both are known (else null)",
                            "zh": "两者都已知时为 num_nodes * gpus_per_node（否则为 null）"},
    "world_size_ok": {"type": "boolean",
                      "en": "world_size equals num_nodes * gpus_per_node (null when either is unknown)",
                      "zh": "world_size 等于 num_nodes * gpus_per_node（任一未知时为 null）"},
    "world_size_reason": {"type": "string",
                          "en": "\"world_size is X, but num_nodes*gpus_per_node is Y\", or why it could "
                                "not be compared (null when it matches)",
                          "zh": "\"world_size is X, but num_nodes*gpus_per_node is Y\"，或无法比较的原因"
                                "（相等时为 null）"},
}
DEFAULT_TIMEOUT = 30.0

_TORCH_FIELDS = ("import_s", "version", "cuda", "cudnn", "cuda_available", "device_count", "nccl_version",
                 "gloo_available", "nccl_available")


def run(params: dict[str, Any], ctx: CheckContext) -> dict[str, Any]:
    result: dict[str, Any] = {name: None for name in RESULT_FIELDS}
    pid = process._pid_param(params.get("pid"))
    env, proc_env = _job_env(pid, ctx, result)
    result["distributed"] = {name: env.get(name) for name in DIST_VARS}
    result["world_size"] = process._env_int(env, "WORLD_SIZE")
    result["visible_devices"] = visible_devices(env.get("CUDA_VISIBLE_DEVICES"))
    python = params.get("python") or (interpreter_of(pid, proc_env) if proc_env else None)
    result["python"] = python or default_python(needs="torch", ctx=ctx)
    result.update(_ask_torch(ctx, result["python"], proc_env))
    result.update(world_size_check(result["world_size"], _int_param(params.get("num_nodes")),
                                   _int_param(params.get("gpus_per_node")), result["device_count"]))
    return result


def _job_env(pid: int | None, ctx: CheckContext, result: dict[str, Any]) -> tuple[dict, dict | None]:
    """(env to read the distributed variables from, the training process's env or None)."""
    if pid is None:
        result["env_source"] = "probe"
        return ctx.env, None
    result["env_source"] = f"pid {pid}"
    try:
        proc_env = _procfs.environ(pid) if pid > 0 else None
    except FileNotFoundError:
        proc_env = None
    except OSError as exc:
        result["env_error"] = f"cannot read /proc/{pid}/environ: {exc.strerror or exc}"
        return {}, None
    if proc_env is None:
        result["env_error"] = f"no process with pid {pid}"
        return {}, None
    return proc_env, proc_env


def interpreter_of(pid: int | None, env: dict[str, str]) -> str | None:
    """The training process's Python as it was started (argv[0]: a venv's python, not its target)."""
    if pid is None:
        return None
    try:
        argv0 = (_procfs.cmdline(pid) or [""])[0]
    except OSError:
        return None
    if not os.path.basename(argv0).startswith("python"):
        return _procfs.exe(pid)
    if os.path.isabs(argv0):
        return argv0
    if os.sep in argv0:
        try:
            return os.path.join(os.readlink(f"/proc/{pid}/cwd"), argv0)
        except OSError:
            return None
    return shutil.which(argv0, path=env.get("PATH")) or _procfs.exe(pid)


def _ask_torch(ctx: CheckContext, python: str, proc_env: dict[str, str] | None) -> dict[str, Any]:
    env = dict(ctx.env)
    for name in _IMPORT_VARS:
        if proc_env is not None and name in proc_env:
            env[name] = proc_env[name]
    outcome = run_worker(CheckContext(deadline=ctx.deadline, env=env), _torch_worker, {}, python)
    if outcome.timed_out:
        return {"available": False, "timed_out": True, "reason": f"import torch: {outcome.error}"}
    data = outcome.data or {}
    if outcome.error or "error" in data:
        why = outcome.error or data["error"]
        if data.get("missing"):
            why = f"torch is not installed for {python} ({why})"
        return {"available": False, "reason": why}
    return {"available": True, "reason": None, **{name: data.get(name) for name in _TORCH_FIELDS}}


def visible_devices(value: str | None) -> int | None:
    """How many devices CUDA_VISIBLE_DEVICES lists (None when unset: every device is visible).

    CUDA reads the list up to the first entry that is neither an index nor a GPU-/MIG- UUID, so
    "-1", "NoDevFiles" and "" hide every device and "0,1,-1,2" shows two.
    """
    if value is None:
        return None
    count = 0
    for entry in value.split(","):
        entry = entry.strip()
        if not (entry.isdigit() or entry.startswith(("GPU-", "MIG-"))):
            break
        count += 1
    return count


def _int_param(value: Any) -> int | None:
    if value is None or isinstance(value, bool) or value == "":
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def world_size_check(
    world_size: int | None, num_nodes: int | None, gpus_per_node: int | None, device_count: int | None,
) -> dict[str, Any]:
    """gpus_per_node, expected_world_size, world_size_ok and world_size_reason."""
    if gpus_per_node is None and device_count:
        gpus_per_node = device_count
    expected = num_nodes * gpus_per_node if num_nodes is not None and gpus_per_node is not None else None
    fields: dict[str, Any] = {"gpus_per_node": gpus_per_node, "expected_world_size": expected,
                              "world_size_ok": None, "world_size_reason": None}
    missing = [name for name, value in (("WORLD_SIZE", world_size), ("num_nodes", num_nodes),
                                        ("gpus_per_node", gpus_per_node)) if value is None]
    if missing:
        fields["world_size_reason"] = f"cannot compare: {', '.join(missing)} unknown"
    elif world_size == expected:
        fields["world_size_ok"] = True
    else:
        fields["world_size_ok"] = False
        fields["world_size_reason"] = (f"world_size is {world_size}, but num_nodes*gpus_per_node is "
                                       f"{expected} ({num_nodes}*{gpus_per_node})")
    return fields
