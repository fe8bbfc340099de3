#!/usr/bin/env python3
"""A real NCCL flight-recorder trace: one rank, a few collectives, the trace in both forms.

    python3 scripts/gpu/fr_dump.py OUTDIR

Writes OUTDIR/fr_trace.pickle (what the NCCL watchdog dumps on a timeout, as torch pickles it)
and OUTDIR/fr_trace.json (the JSON variant, where this torch has it), plus fr_env.json with the
versions. Nothing here unpickles the trace: it is kept as bytes for the parser's tests.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TORCH_FR_BUFFER_SIZE", "2000")
    os.environ.setdefault("TORCH_NCCL_TRACE_BUFFER_SIZE", "2000")  # the older name
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), RANK="0", WORLD_SIZE="1")
    import torch
    import torch.distributed as dist
    from torch._C import _distributed_c10d as c10d

    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
    x = torch.ones(1 << 20, device="cuda")
    dist.all_reduce(x)
    dist.broadcast(x, 0)
    gathered = torch.empty(1 << 20, device="cuda")
    dist.all_gather_into_tensor(gathered, x)
    dist.barrier()
    torch.cuda.synchronize()
    env = {"torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
           "cuda": torch.version.cuda, "functions": sorted(n for n in dir(c10d) if "dump" in n)}
    dumps = (("_dump_nccl_trace", "fr_trace.pickle"), ("_dump_fr_trace", "fr_trace_fr.pickle"),
             ("_dump_nccl_trace_json", "fr_trace.json"), ("_dump_fr_trace_json", "fr_trace_fr.json"))
    env["errors"] = {}
    for name, file in dumps:
        if not hasattr(c10d, name):
            continue
        try:  # one dump function failing must not lose the others
            data = getattr(c10d, name)()
        except Exception as exc:
            env["errors"][name] = f"{type(exc).__name__}: {exc}"
            continue
        (out / file).write_bytes(data if isinstance(data, bytes) else str(data).encode())
    (out / "fr_env.json").write_text(json.dumps(env, indent=1))
    dist.destroy_process_group()
    print(json.dumps(env))
    return 0


if __name__ == "__main__":
    sys.exit(main())
