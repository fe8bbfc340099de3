"""`runbook test [PATH...]`: run each runbook's test file and replay the recorded incidents beside
the runbooks; every conclusion must be reached. `--coverage` also measures steps and branches;
`--replay DIR...` walks recorded incidents again (see `cli/test/replay_view.py`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from runbook.i18n.textwidth import pad, width

UI: dict[str, dict[str, Any]] = {
    "en": {"passed": "{passed} passed, {failed} failed", "coverage": "coverage:",
           "unreached": "no test reaches conclusion {c!r}", "no_file": "no test file {name} beside "
           "the runbook", "lint": "runbook test: fix the lint errors above first",
           "accept_alone": "runbook test: --accept only makes sense with --replay DIR",
           "parts": ("steps", "branches", "conclusions")},
    "zh": {"passed": "通过 {passed} 个，失败 {failed} 个", "coverage": "覆盖率：",
           "unreached": "没有测试用例到达结论 {c!r}", "no_file": "runbook 旁边没有测试文件 {name}",
           "lint": "runbook test：请先修复上面的 lint 错误",
           "accept_alone": "runbook test：--accept 只能与 --replay DIR 一起使用",
           "parts": ("步骤", "分支", "结论")},
}


def run(args: argparse.Namespace) -> int:
    from runbook.library.runbooks import load_in_context, search_path

    ui = UI[args.lang]
    if args.accept and not args.replay:
        print(ui["accept_alone"], file=sys.stderr)
        return 2
    # The given runbooks are tested inside the whole library: a case may walk into another
    # runbook, and a reference to one resolves.
    library, chosen = load_in_context([Path(p) for p in args.paths] or search_path())
    args.chosen = chosen
    own = [p for p in library.problems if p.file in chosen]
    if any(p.severity == "error" for p in own):
        for problem in own:
            print(problem, file=sys.stderr)
        print(ui["lint"], file=sys.stderr)
        return 2
    if args.replay:
        from runbook.cli.test.replay_view import run_replays

        return run_replays(library, [Path(d) for d in args.replay], args.accept, args.format,
                           args.lang)
    return _run_tests(library, args)


def _run_tests(library: Any, args: argparse.Namespace) -> int:
    from runbook.testing.coverage import coverage, union

    ui = UI[args.lang]
    results = _all_cases(library, ui, args.chosen)
    reach = union(r.reach for r in results if r.ok)
    report = [{"runbook": r.runbook, "case": r.name, "failures": r.failures} for r in results]
    measured = [coverage(rb, reach) for rb in sorted(library.runbooks(), key=lambda rb: rb.path)
                if rb.path in args.chosen]
    for cov in measured:
        if cov.unreached_conclusions:
            report.append({"runbook": cov.runbook, "case": "(coverage)",
                           "failures": [ui["unreached"].format(c=g.path.split(".", 1)[1])
                                        for g in cov.unreached_conclusions]})
    failed = sum(1 for row in report if row["failures"])
    incomplete = args.coverage and any(not cov.complete for cov in measured)
    if args.format == "json":
        doc: dict[str, Any] = {"failed": failed, "cases": report}
        if args.coverage:
            doc["coverage"] = [cov.to_json() for cov in measured]
        print(json.dumps(doc, ensure_ascii=False, indent=2))
    else:
        _print_cases(report, failed, ui)
        if args.coverage:
            _print_coverage(measured, ui)
    return 1 if failed or incomplete else 0


def _all_cases(library: Any, ui: dict[str, Any], chosen: set[str]) -> list[Any]:
    """Every case of the chosen runbooks' test files, then every recording of theirs that no
    case names."""
    from runbook.testing.runner import (
        CaseResult,
        find_recordings,
        run_recording,
        run_test_file,
        tests_file_for,
    )

    results: list[CaseResult] = []
    named: set[Path] = set()
    for loaded in sorted(library.by_id.values(), key=lambda r: r.path):
        if loaded.path not in chosen:
            continue
        rid = loaded.runbook.id
        test_file = tests_file_for(loaded.path)
        if not test_file.exists():
            results.append(CaseResult(str(test_file), "(file)",
                                      [ui["no_file"].format(name=test_file.name)], runbook=rid))
            continue
        _, cases = run_test_file(test_file, library)
        results.extend(_with_runbook(c, rid) for c in cases)
        named |= {c.recording for c in cases if c.recording}
    ids = {r.runbook.id for r in library.by_id.values() if r.path in chosen}
    for file in find_recordings(library):
        if file.resolve() not in named:
            result = run_recording(file, library)
            results.extend([result] if result is not None and result.runbook in ids else [])
    return results


def _with_runbook(result: Any, rid: str) -> Any:
    result.runbook = result.runbook or rid
    return result


def _print_cases(report: list[dict[str, Any]], failed: int, ui: dict[str, Any]) -> None:
    for row in report:
        failures = row["failures"]
        mark = "FAIL" if failures else "ok  "
        print(f"{mark} {row['runbook']}: {row['case']}")
        for failure in failures:
            print(f"       {failure}")
    print(ui["passed"].format(passed=len(report) - failed, failed=failed))


def _print_coverage(measured: list[Any], ui: dict[str, Any]) -> None:
    print(ui["coverage"])
    rows = [[cov.runbook, *(f"{name} {got}/{total}" for name, (got, total) in
                            zip(ui["parts"], (cov.steps, cov.branches, cov.conclusions), strict=True))]
            for cov in measured]
    widths = [max((width(row[i]) for row in rows), default=0) for i in range(4)]
    for cov, row in zip(measured, rows, strict=True):
        print("  ".join(pad(cell, w) for cell, w in zip(row, widths, strict=True)).rstrip())
        for gap in [*cov.unreached_branches, *cov.unreached_conclusions]:
            print(f"    {gap}")
