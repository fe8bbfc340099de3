"""The `--format json` report's encoder against the standard library's, on a real report.

Run from the repository root:
    .venv/bin/python bench/report_json.py [--nodes 64] [--rounds 20]

It runs `runbook run training-hang --format json` on this machine (the local executor) for a
real one-node report, makes an N-node document of it (the node copied under N names, as a
cluster whose nodes answered alike), and times writing it both ways in the same process:
`json.dumps(indent=2, ensure_ascii=False, default=str)`, what `--format json` wrote before
session 36, and report/prettyjson.py, which writes the same bytes (checked here).
Prints the medians and their ratio.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "engine"))

from runbook.report.prettyjson import dumps  # noqa: E402


def real_report() -> dict:
    out = subprocess.run([sys.executable, "-m", "runbook", "run", "training-hang", "--format", "json"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "engine")})
    return json.loads(out.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    report = real_report()
    node = report["nodes"][0]
    report["nodes"] = [{**copy.deepcopy(node), "node": f"gpu{i:04d}"} for i in range(args.nodes)]
    reference = json.dumps(report, indent=2, ensure_ascii=False, default=str)
    if dumps(report) != reference:
        print("prettyjson wrote other bytes than the standard library", file=sys.stderr)
        return 1
    timings: dict[str, list[float]] = {"stdlib": [], "prettyjson": []}
    for _ in range(args.rounds):
        for name, write in (("stdlib", lambda: json.dumps(report, indent=2, ensure_ascii=False,
                                                           default=str)),
                            ("prettyjson", lambda: dumps(report))):
            start = time.process_time()
            write()
            timings[name].append(time.process_time() - start)
    std, fast = (statistics.median(timings[k]) * 1000 for k in ("stdlib", "prettyjson"))
    print(f"report: {args.nodes} nodes, {len(reference) / 1024:.0f} KiB")
    print(f"json.dumps(indent=2)   {std:8.2f} ms CPU   {std / args.nodes:.3f} ms/node")
    print(f"report/prettyjson.py   {fast:8.2f} ms CPU   {fast / args.nodes:.3f} ms/node")
    print(f"prettyjson / json.dumps: {fast / std:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
