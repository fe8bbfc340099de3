"""`runbook test [PATH...]`: run each runbook's test file; every conclusion must be reached."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def run(args: argparse.Namespace) -> int:
    from runbook.library import load_library, search_path
    from runbook.testing import run_test_file, tests_file_for

    paths = [Path(p) for p in args.paths] or search_path()
    library = load_library(paths)
    if any(p.severity == "error" for p in library.problems):
        for problem in library.problems:
            print(problem, file=sys.stderr)
        print("runbook test: fix the lint errors above first", file=sys.stderr)
        return 2
    report: list[dict[str, object]] = []
    failed = 0
    for loaded in sorted(library.by_id.values(), key=lambda r: r.path):
        runbook = loaded.runbook
        assert runbook is not None
        test_file = tests_file_for(loaded.path)
        if not test_file.exists():
            failures = [f"no test file {test_file.name} beside the runbook"]
            report.append({"runbook": runbook.id, "case": "(file)", "failures": failures})
            failed += 1
            continue
        _, results = run_test_file(test_file, library)
        reached = set().union(*(r.reached for r in results if r.ok))
        for r in results:
            report.append({"runbook": runbook.id, "case": r.name, "failures": r.failures})
            failed += not r.ok
        unreached = [c for c in runbook.conclusions if f"{runbook.id}:{c}" not in reached]
        if unreached:
            report.append({"runbook": runbook.id, "case": "(coverage)",
                           "failures": [f"no test reaches conclusion {c!r}" for c in unreached]})
            failed += 1
    return _print(report, failed, args.format)


def _print(report: list[dict[str, object]], failed: int, fmt: str) -> int:
    if fmt == "json":
        print(json.dumps({"failed": failed, "cases": report}, ensure_ascii=False, indent=2))
    else:
        for row in report:
            failures = row["failures"]
            mark = "FAIL" if failures else "ok  "
            print(f"{mark} {row['runbook']}: {row['case']}")
            for failure in failures:  # type: ignore[attr-defined]
                print(f"       {failure}")
        passed = len(report) - failed
        print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0
