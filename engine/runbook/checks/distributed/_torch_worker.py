"""The child-process half of the `torch` check: import torch in the node's Python and describe it.

Runs as `python -c <this source> <payload json>` (see `_subpython`): standard library at module
level, nothing from runbook, torch imported inside `answer`; Python 3.8 syntax. The answer is one
line, MARK + JSON, written last on stdout; anything torch prints goes to stderr.

Payload: {} (nothing needed)
Answer:  {"version", "cuda", "cudnn", "cuda_available", "device_count", "nccl_version",
          "distributed_available", "gloo_available", "nccl_available", "import_s"}
         or {"missing": "torch", "error"} when torch cannot be imported, or {"error"}
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Callable
from typing import Any

MARK = "RUNBOOK-WORKER-RESULT "


def main() -> None:
    real_stdout = sys.stdout
    try:
        with contextlib.redirect_stdout(sys.stderr):
            result = answer(json.loads(sys.argv[1]) if len(sys.argv) > 1 else {})
    except BaseException as exc:  # the parent needs an answer, whatever went wrong
        result = {"error": one_line(exc)}
    real_stdout.write("\n" + MARK + json.dumps(result, default=str) + "\n")
    real_stdout.flush()


def one_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0]}"[:400] if lines else type(exc).__name__


def answer(_payload: dict[str, Any]) -> dict[str, Any]:
    start = time.monotonic()
    try:
        import torch
    except ImportError as exc:
        return {"missing": "torch", "error": one_line(exc)}
    result: dict[str, Any] = {"import_s": round(time.monotonic() - start, 3)}
    result["version"] = str(torch.__version__)
    result["cuda"] = getattr(torch.version, "cuda", None)
    result["cudnn"] = _safe(lambda: torch.backends.cudnn.version())
    result["cuda_available"] = bool(_safe(torch.cuda.is_available, False))
    result["device_count"] = int(_safe(torch.cuda.device_count, 0) or 0)
    result["nccl_version"] = nccl_version(torch)
    result.update(_distributed(torch))
    return result


def _safe(call: Callable[[], Any], default: Any = None) -> Any:
    try:
        return call()
    except Exception:
        return default


def nccl_version(torch: Any) -> str | None:
    """torch.cuda.nccl.version() as "2.21.5" (None on a build without NCCL)."""
    try:
        import torch.cuda.nccl as nccl

        value = nccl.version()
    except Exception:
        return None
    return format_nccl_version(value)


def format_nccl_version(value: Any) -> str | None:
    if isinstance(value, (tuple, list)):
        return ".".join(str(part) for part in value[:3])
    if isinstance(value, int) and value > 0:
        # NCCL_VERSION_CODE: major*10000 + minor*100 + patch since 2.9, major*1000 + ... before.
        if value >= 10000:
            return f"{value // 10000}.{value % 10000 // 100}.{value % 100}"
        return f"{value // 1000}.{value % 1000 // 100}.{value % 100}"
    return None


def _distributed(torch: Any) -> dict[str, Any]:
    try:
        import torch.distributed as dist
    except Exception:
        return {"distributed_available": False, "gloo_available": False, "nccl_available": False}
    available = bool(_safe(dist.is_available, False))
    return {
        "distributed_available": available,
        "gloo_available": available and bool(_safe(dist.is_gloo_available, False)),
        "nccl_available": available and bool(_safe(dist.is_nccl_available, False)),
    }


if __name__ == "__main__":
    main()
