#!/usr/bin/env python3
"""Real flight-recorder dumps of 4-rank gloo jobs on CPU, one folder per scenario.

    .venv/bin/python scripts/fr_gloo_dumps.py [OUTDIR] [SCENARIO...]

OUTDIR defaults to tests/data/flight-recorder; each scenario writes OUTDIR/gloo-<scenario>/
rank<N>.pickle (what `_dump_fr_trace()` returns: what the watchdog writes to
`<TORCH_FR_DUMP_TEMP_FILE><rank>`) and rank<N>.json (`_dump_fr_trace_json()`, where this torch
has it), plus env.json with the versions. Scenarios:

    in-sync    every rank issues the same 5 all_reduce
    mismatch   3 all_reduce alike, then collective #4 is all_gather on ranks 0-2 and broadcast
               on rank 3 (async; dumped after a short wait, not waiting for completion)
    behind     6 all_reduce, but rank 2 skips the last one: one sequence number behind
    missing    4 all_reduce on every rank, but rank 2 dies before dumping (no dump from it)

Nothing here unpickles a dump: the bytes are written as torch returns them.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import sys
import time
from pathlib import Path

WORLD = 4
SCENARIOS = ("in-sync", "mismatch", "behind", "missing")
ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _dump(out: Path, rank: int) -> None:
    from torch._C import _distributed_c10d as c10d

    (out / f"rank{rank}.pickle").write_bytes(c10d._dump_fr_trace())
    if hasattr(c10d, "_dump_fr_trace_json"):
        data = c10d._dump_fr_trace_json()
        (out / f"rank{rank}.json").write_bytes(data if isinstance(data, bytes) else str(data).encode())


def _collectives(scenario: str, rank: int) -> None:
    """What each rank issues; returns once its dump can be taken."""
    import torch
    import torch.distributed as dist

    x = torch.ones(8)
    if scenario == "in-sync":
        for _ in range(5):
            dist.all_reduce(x)
    elif scenario == "mismatch":
        for _ in range(3):
            dist.all_reduce(x)
        if rank == 3:
            work = dist.broadcast(x, src=3, async_op=True)
        else:
            work = dist.all_gather([torch.empty(8) for _ in range(WORLD)], x, async_op=True)
        _settle(work)
    elif scenario == "behind":
        for _ in range(5):
            dist.all_reduce(x)
        if rank != 2:
            _settle(dist.all_reduce(x, async_op=True))
        else:
            time.sleep(2.0)
    elif scenario == "missing":
        for _ in range(4):
            dist.all_reduce(x)


def _settle(work: object) -> None:
    """Give a collective that cannot complete a moment, then go on to the dump without it."""
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline and not work.is_completed():  # type: ignore[attr-defined]
        time.sleep(0.05)


def worker(rank: int, scenario: str, out: str, port: int) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=WORLD, timeout=datetime.timedelta(seconds=20))
    _collectives(scenario, rank)
    if scenario == "missing" and rank == 2:
        os._exit(1)  # the rank that died before it could dump
    _dump(Path(out), rank)
    # Ranks of a mismatched or behind job cannot agree on a clean shutdown: leave at once.
    sys.stdout.flush()
    os._exit(0)


def run(scenario: str, base: Path) -> Path:
    import torch.multiprocessing as mp

    out = base / f"gloo-{scenario}"
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("rank*"):
        old.unlink()
    ctx = mp.start_processes(worker, args=(scenario, str(out), free_port()), nprocs=WORLD,
                             join=False, start_method="spawn")
    deadline = time.monotonic() + 90
    while not all(p.exitcode is not None for p in ctx.processes):
        if time.monotonic() > deadline:
            for p in ctx.processes:
                p.kill()
            raise SystemExit(f"{scenario}: ranks still running after 90 s, killed")
        time.sleep(0.1)
    codes = [p.exitcode for p in ctx.processes]
    print(f"{scenario}: exit codes {codes}, files {sorted(p.name for p in out.glob('rank*'))}")
    return out


def main(argv: list[str]) -> int:
    base = Path(argv[0]) if argv else ROOT / "tests" / "data" / "flight-recorder"
    chosen = argv[1:] or list(SCENARIOS)
    os.environ["TORCH_FR_BUFFER_SIZE"] = "2000"  # spawned ranks inherit it, before init_process_group
    import torch
    from torch._C import _distributed_c10d as c10d

    for scenario in chosen:
        out = run(scenario, base)
        env = {"torch": torch.__version__, "backend": "gloo", "world_size": WORLD, "scenario": scenario,
               "functions": sorted(n for n in dir(c10d) if "dump" in n)}
        (out / "env.json").write_text(json.dumps(env, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
