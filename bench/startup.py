"""How fast `runbook --help` starts, against a bare Python and the tools people use instead.

Run: .venv/bin/python bench/startup.py   (prints medians of N runs and the ratios)
The engine must import nothing heavy at start-up; the target is well under 200 ms.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

RUNS = 20
BIN = Path(sys.executable).parent


def median_ms(argv: list[str], runs: int = RUNS) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> int:
    runbook = str(BIN / "runbook")
    rows = {
        "python3 -c pass": median_ms([sys.executable, "-c", "pass"]),
        "runbook --help": median_ms([runbook, "--help"]),
        "runbook lint runbooks": median_ms([runbook, "lint", "runbooks"], runs=5),
    }
    for tool in ("ansible", "ansible-playbook"):
        if shutil.which(tool):
            rows[f"{tool} --help"] = median_ms([tool, "--help"], runs=5)
    width = max(len(k) for k in rows) + 2
    base = rows["runbook --help"]
    print(f"{'command'.ljust(width)}{'median ms':>10}  ratio to runbook --help")
    for name, ms in rows.items():
        print(f"{name.ljust(width)}{ms:>10.1f}  {ms / base:>6.2f}x")
    verdict = "OK" if base < 200 else "TOO SLOW"
    print(f"\nrunbook --help: {base:.1f} ms (target < 200 ms): {verdict}")
    return 0 if base < 200 else 1


if __name__ == "__main__":
    sys.exit(main())
