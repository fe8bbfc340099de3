"""How fast runbook starts: `runbook --help`, and the time from `runbook run` to its first check.

    .venv/bin/python bench/startup.py [--runs 20] [--json]

Both are set against a bare Python start (`python3 -c pass`) measured in the same run,
interleaved, so a busy moment of the machine hits them alike. The first check is a `command`
check (bench/startup_runbooks/first-check.yaml) that writes the clock in nanoseconds to a file:
the time to the first check is that moment minus the moment the process was started. Goals:
`runbook --help` at most 2.5x bare Python; the first check soon after (no heavy import before
it is needed). Exit status 0 even when a goal is missed (a benchmark reports).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[1]
HELP_GOAL = 2.5  # runbook --help / bare Python


def timed_ms(argv: list[str], env: dict[str, str] | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=env,
                   timeout=120)
    return (time.perf_counter() - start) * 1000


def first_check_ms(stamp: Path) -> tuple[float, float]:
    """(ms from starting `runbook run first-check` to its check running, ms for the whole run)."""
    stamp.unlink(missing_ok=True)
    env = {**os.environ, "RUNBOOK_PATH": str(ROOT / "bench" / "startup_runbooks"), "RUNBOOK_LANG": "en"}
    started = time.time_ns()
    whole = timed_ms([str(BIN / "runbook"), "run", "first-check", "--set", f"stamp={stamp}",
                      "--format", "json"], env)
    try:
        ran = int(stamp.read_text().strip())
    except (OSError, ValueError):
        raise SystemExit(f"bench/startup.py: the first check wrote no time to {stamp}: "
                         "run `.venv/bin/runbook run first-check` with RUNBOOK_PATH=bench/startup_runbooks "
                         "to see why") from None
    return (ran - started) / 1e6, whole


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="runs of each (the median is reported)")
    parser.add_argument("--json", action="store_true", help="one JSON document")
    args = parser.parse_args()
    runbook = str(BIN / "runbook")
    samples: dict[str, list[float]] = {"python3 -c pass": [], "runbook --help": [],
                                       "runbook run: first check": [], "runbook run: whole run": []}
    with tempfile.TemporaryDirectory(prefix="runbook-startup-") as tmp:
        stamp = Path(tmp) / "first-check.ns"
        for _ in range(max(1, args.runs)):  # interleaved: each round runs every command once
            samples["python3 -c pass"].append(timed_ms([sys.executable, "-c", "pass"]))
            samples["runbook --help"].append(timed_ms([runbook, "--help"]))
            first, whole = first_check_ms(stamp)
            samples["runbook run: first check"].append(first)
            samples["runbook run: whole run"].append(whole)
    rows = {name: statistics.median(times) for name, times in samples.items()}
    for tool in ("ansible", "ansible-playbook"):
        if shutil.which(tool):
            rows[f"{tool} --help"] = statistics.median(timed_ms([tool, "--help"]) for _ in range(5))
    bare = rows["python3 -c pass"]
    ratio = rows["runbook --help"] / bare
    result = {"median_ms": {k: round(v, 1) for k, v in rows.items()}, "help_ratio": round(ratio, 2),
              "first_check_ratio": round(rows["runbook run: first check"] / bare, 2),
              "help_goal_met": ratio <= HELP_GOAL, "runs": args.runs}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    width = max(len(k) for k in rows) + 2
    print(f"{'command'.ljust(width)}{'median ms':>10}  ratio to bare Python")
    for name, ms in rows.items():
        print(f"{name.ljust(width)}{ms:>10.1f}  {ms / bare:>6.2f}x")
    verdict = "met" if result["help_goal_met"] else "MISSED"
    print(f"\nrunbook --help / bare Python: {ratio:.2f} (goal <= {HELP_GOAL}): {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
