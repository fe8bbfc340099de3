"""Where a thread waits, from its frames: the rules the `stack` check and `runbook triage` share.

A frame is a dict with `filename`, `name` (the function) and, for a native frame, `module` or a
`.so` filename, as py-spy's JSON gives it; triage/readings/stacks.py builds the same dicts from a pasted
py-spy, faulthandler or gdb dump. `classify(frames)` (innermost frame first) returns
(waits, op): the first RULES entry any frame matches, innermost first, else a native CUDA
synchronize or c10d wait (NATIVE), else socket/file I/O (IO), else ("running", None).

The rules are data so that the site's triage page applies the same ones (site/triage_export.py).
A rule matches a frame when its path ends with one of `suffix` or holds one of `contains`, and
its function (the last dotted part of the name) is one of `funcs`; `op` names the operation
(`{func}`: the function itself).
"""

from __future__ import annotations

import re
from typing import Any

COLLECTIVE_OPS = (
    "all_reduce", "barrier", "broadcast", "all_gather", "reduce_scatter", "reduce", "gather",
    "scatter", "all_to_all", "send", "recv", "wait", "all_gather_into_tensor", "reduce_scatter_tensor",
    "all_to_all_single", "monitored_barrier", "all_gather_object", "gather_object",
    "broadcast_object_list", "scatter_object_list", "all_reduce_coalesced", "all_gather_coalesced",
    "_all_gather_base", "_reduce_scatter_base",
)
WAITS = ("collective", "rendezvous", "dataloader", "ray", "engine-workers", "cuda-sync", "gpu-kernel",
         "extension-lock", "lock", "backward", "io", "running", "idle")
RULES: list[dict[str, Any]] = [
    {"waits": "collective", "op": "{func}", "funcs": COLLECTIVE_OPS,
     "suffix": ("torch/distributed/distributed_c10d.py", "deepspeed/comm/comm.py",
                "deepspeed/comm/torch.py")},
    # DeepSpeed ZeRO's own gathers and reductions (runtime/zero/partition_parameters.py,
    # stage_1_and_2.py): py-spy shows no frame below them while the collective's C++ call blocks
    {"waits": "collective", "op": "{func}", "contains": ("deepspeed/runtime/zero/",),
     "funcs": ("_allgather_params", "_allgather_params_coalesced", "_allgather_param", "all_gather_coalesced",
               "allreduce_bucket", "average_tensor")},
    # a rank that never got past init_process_group: the store or the rendezvous waits for peers
    {"waits": "rendezvous", "op": "{func}", "contains": ("torch/distributed/",),
     "funcs": ("_create_c10d_store", "_env_rendezvous_handler", "_tcp_rendezvous_handler", "_create_store",
               "next_rendezvous", "_rendezvous", "_store_based_barrier", "_exit_barrier")},
    {"waits": "dataloader", "op": "{func}", "contains": ("torch/utils/data/",),
     "funcs": ("_next_data", "_get_data", "_try_get_data", "_shutdown_workers", "join")},
    {"waits": "ray", "op": "ray.wait", "suffix": ("ray/_private/worker.py",),
     "funcs": ("wait", "wait_objects")},
    {"waits": "ray", "op": "ray.get", "suffix": ("ray/_private/worker.py",),
     "funcs": ("get", "get_objects")},
    # an inference engine's core waiting for its workers' answers (vLLM's executors, through a
    # shared-memory queue or RPC): the workers are stuck or gone. A worker's own loop waits on the
    # same queue for its next request, so the rule names the executor's calls, not the queue's.
    {"waits": "engine-workers", "op": "{func}", "contains": ("vllm/v1/executor/", "vllm/executor/"),
     "funcs": ("get_response", "_wait_for_response", "collective_rpc", "_run_workers")},
    # the input pipeline decoding a sample in this thread (a DataLoader without workers, or a
    # worker's own stack): decord is known to hang on some H.264 files, and a file on a mount
    # that does not answer blocks any decoder's read
    {"waits": "dataloader", "op": "decode {func}", "contains": ("decord/",),
     "funcs": ("get_batch", "next", "seek", "seek_accurate", "skip_frames", "get_frame_timestamp",
               "__getitem__")},
    {"waits": "dataloader", "op": "decode {func}", "contains": ("torchvision/io/",),
     "funcs": ("read_video", "read_video_timestamps", "read_image", "decode_image", "decode_jpeg",
               "read_file", "__next__")},
    {"waits": "cuda-sync", "op": "{func}", "contains": ("torch/cuda/",), "funcs": ("synchronize",)},
    # the JIT build's lock in the extensions dir
    {"waits": "extension-lock", "op": "FileBaton.wait", "suffix": ("torch/utils/file_baton.py",),
     "funcs": ("wait",)},
    {"waits": "lock", "op": "{func}", "suffix": ("logging/__init__.py",),
     "funcs": ("acquire", "_acquireLock")},
    {"waits": "lock", "op": "{func}", "suffix": ("multiprocessing/synchronize.py", "filelock/_api.py"),
     "funcs": ("acquire", "__enter__")},
    {"waits": "lock", "op": "{func}", "suffix": ("threading.py",), "funcs": ("acquire", "_acquire_restore")},
    # inside autograd's C++ engine: with DDP or ZeRO the gradients' collectives run from its hooks,
    # so an idle thread here waits on them (py-spy shows no Python frame for the collective)
    {"waits": "backward", "op": "autograd backward",
     "suffix": ("torch/autograd/__init__.py", "torch/autograd/graph.py"),
     "funcs": ("backward", "_engine_run_backward", "run_backward")},
]
# With native frames (py-spy --native, gdb): a CUDA synchronize, or c10d waiting on a collective's
# Work (DDP's C++ reducer, where no Python frame names the collective). Python frames come first.
NATIVE: list[dict[str, str]] = [
    {"waits": "cuda-sync", "pattern": r"^(cudaStreamSynchronize|cudaDeviceSynchronize|cudaEventSynchronize"
                                      r"|cudaMemcpy|cuStreamSynchronize|cuCtxSynchronize|cuEventSynchronize)\b"},
    {"waits": "collective", "pattern": r"^c10d::[^(]*::wait(?:\(|$)", "op": "wait"},
    # A kernel launch returns at once unless the stream's queue is full: a thread that stays in
    # one waits for a kernel already on the GPU that does not finish.
    {"waits": "gpu-kernel", "pattern": r"^(cuLaunchKernel|cuLaunchKernelEx|cuLaunchCooperativeKernel"
                                       r"|cudaLaunchKernel|cudaLaunchKernelExC|cudaLaunchCooperativeKernel)\b",
     "op": "launch"},
]
IO_FILES = ("socket.py", "ssl.py", "selectors.py", "io.py", "_pyio.py")
IO_SUFFIXES = ("multiprocessing/connection.py",)
IO_FUNCS = (
    "read", "readinto", "readline", "readlines", "recv", "recv_into", "recvfrom", "recvfrom_into",
    "recvmsg", "write", "writelines", "send", "sendall", "sendto", "sendmsg", "sendfile", "accept",
    "connect", "create_connection", "open", "select", "poll", "do_handshake", "_recv", "_recv_bytes",
    "recv_bytes", "_poll", "wait",
)
_NATIVE_RES = [(rule, re.compile(rule["pattern"])) for rule in NATIVE]
SO_FILE = re.compile(r"\.so(\.[\d.]+)?$")


def path_func(frame: dict[str, Any]) -> tuple[str, str]:
    path = str(frame.get("filename") or "").replace("\\", "/")
    return path, str(frame.get("name") or "").rsplit(".", 1)[-1]


def is_native(frame: dict[str, Any]) -> bool:
    return bool(frame.get("module")) or bool(SO_FILE.search(str(frame.get("filename"))))


def classify(frames: list[dict[str, Any]]) -> tuple[str, str | None]:
    """(waits, op) of a stack, innermost frame first. I/O counts only when nothing more specific
    is on the stack (a DataLoader waits on its queue through selectors.select)."""
    for frame in frames:
        found = _python_rule(frame)
        if found is not None:
            return found
    for frame in frames:
        found = _native_rule(frame)
        if found is not None:
            return found
    for frame in frames:
        path, func = path_func(frame)
        if func in IO_FUNCS and (path.rsplit("/", 1)[-1] in IO_FILES or path.endswith(IO_SUFFIXES)):
            return "io", func
    return "running", None


def _python_rule(frame: dict[str, Any]) -> tuple[str, str] | None:
    path, func = path_func(frame)
    for rule in RULES:
        if func not in rule["funcs"]:
            continue
        if path.endswith(tuple(rule.get("suffix", ()))) or any(
                part in path for part in rule.get("contains", ())):
            return rule["waits"], rule["op"].replace("{func}", func)
    return None


def _native_rule(frame: dict[str, Any]) -> tuple[str, str] | None:
    if not is_native(frame):
        return None
    name = str(frame.get("name") or "")
    for rule, regex in _NATIVE_RES:
        if regex.search(name):
            return rule["waits"], rule.get("op") or name.split("(")[0]
    return None
