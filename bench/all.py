"""`make bench`: the quick runs of every benchmark, then one table of figures, ratios and goals.

    .venv/bin/python bench/all.py [--only startup scale ...] [--json]

Each benchmark runs as its own process with `--json` (its progress goes to stderr, shown as it
comes); a benchmark that fails or times out is a row saying so, and the others still run.
The full runs (100,000 simulated nodes, 256 SSH hosts, 8 Ray nodes, a site of 500 + 500 pages)
are the benchmarks' own defaults: see bench/README.md. The diagnosis benchmark has no quick form:
its full run (every recording, every corpus log) takes about a minute.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
Row = tuple[str, str, str, bool | None]  # figure, value, goal, met (None: no goal)


@dataclass
class Bench:
    name: str
    argv: list[str]
    rows: Callable[[dict[str, Any]], list[Row]]
    timeout_s: float


def _ratio(value: float, goal: float, unit: str = "x") -> tuple[str, str, bool]:
    return f"{value:.2f}{unit}", f"<= {goal:g}{unit}", value <= goal


def startup_rows(doc: dict[str, Any]) -> list[Row]:
    ms = doc["median_ms"]
    return [("runbook --help / bare Python", *_ratio(doc["help_ratio"], 2.5)),
            ("runbook run to its first check", f"{ms['runbook run: first check']:.0f} ms", "small", None)]


def streamed_scale_rows(doc: dict[str, Any]) -> list[Row]:
    """The engine as the 100,000-node path drives it: a batching transport (the gateways'), the
    report streamed as JSON Lines."""
    run = doc["runs"][-1]
    per_node = run["cpu_ms_per_node"]
    return [(f"engine, {run['nodes']:,} nodes, batched + streamed: CPU per node", f"{per_node:.3f} ms",
             "<= 0.1 ms", per_node <= 0.1),
            ("  peak memory", f"{run['peak_mb']:.0f} MB", "", None)]


def scale_rows(doc: dict[str, Any]) -> list[Row]:
    run = doc["runs"][-1]
    per_node = run["cpu_ms_per_node"]
    return [(f"engine, {run['nodes']:,} nodes, node by node + document: CPU per node", f"{per_node:.3f} ms",
             "<= 0.1 ms", per_node <= 0.1),
            (f"  100,000 nodes projected (x{100_000 // run['nodes']})", f"{per_node * 100:.0f} s CPU",
             "< 10 s", per_node * 100 < 10),
            ("  report (JSON and grouped text)", f"{run['report_cpu_s']:.2f} s CPU",
             f"{run['text_lines']} text lines", None)]


def fanout_rows(doc: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    for ratio in doc["ratios"]:
        if ratio["value"] is None:
            continue
        goal = f"<= {ratio['target']:g}" if ratio["target"] is not None else ""
        rows.append((f"SSH, {doc['hosts']} hosts: {ratio['ratio']}", f"{ratio['value']:.2f}", goal,
                     ratio["met"]))
    per_host = doc["client_cpu_per_host"]
    if per_host["value_ms"] is not None:
        rows.append((f"SSH, {doc['hosts']} hosts: client CPU per host", f"{per_host['value_ms']:.1f} ms",
                     f"<= {per_host['target_ms']:g} ms", per_host["met"]))
    failed = [m for m in doc["methods"] if m.get("error")]
    rows.extend((f"  {m['name']}", "FAILED", str(m["error"])[:40], False) for m in failed)
    return rows


def reuse_rows(doc: dict[str, Any]) -> list[Row]:
    """Issue #28's SSH goals: client CPU per added host of a first run and of a repeat within
    --ssh-persist, beside plain `ssh` with ControlPersist measured in the same run."""
    by = {r["method"]: r for r in doc["results"]}
    rows: list[Row] = []
    for key, label in (("first_ms", "first run"), ("repeat_ms", "repeat")):
        target = doc["targets"][key]
        rows.append((f"SSH, {doc['hosts']} hosts, {label}: client CPU per added host",
                     f"{target['value']:.1f} ms", f"<= {target['target']:g} ms", target["met"]))
    plain = by.get("ssh ControlPersist repeat")
    repeat = by.get("runbook repeat")
    if plain and repeat and repeat["marginal_ms_per_host"] is not None:
        rows.append(("  repeat / ssh ControlPersist repeat (per host)",
                     f"{repeat['marginal_ms_per_host'] / plain['client_cpu_ms_per_host']:.2f}x",
                     f"{plain['client_cpu_ms_per_host']:.1f} ms/host", None))
    return rows


def broken_lint_rows(doc: dict[str, Any]) -> list[Row]:
    lint = doc["lint"]
    figure = f"lint, {doc['runbooks']:,} runbooks broken, {lint['warm']['problems']:,} problems, warm"
    return [(figure, f"{lint['warm']['wall']:.2f} s", lint["goal"].replace("warm ", ""), lint["met"])]


def ray_rows(doc: dict[str, Any]) -> list[Row]:
    biggest = max(p["nodes"] for p in doc["points"])
    at = {p["executor"]: p for p in doc["points"] if p["nodes"] == biggest}
    rows: list[Row] = []
    for executor in ("ray", "ssh"):
        point = at.get(executor)
        if point is None or point.get("error"):
            rows.append((f"{executor} at {biggest} nodes", "FAILED", (point or {}).get("error") or "", False))
            continue
        rows.append((f"{executor}, {biggest} nodes, fanout-5: wall / client CPU",
                     f"{point['wall_s']:.2f} / {point['cpu_s']:.2f} s", "", None))
    cpu = (doc.get("projection") or {}).get("ray_cpu_s") or {}
    if cpu.get("at") is not None:
        rows.append(("  Ray, 2,000 nodes projected: client CPU", f"{cpu['at']:.1f} s", "see README", None))
    return rows


def site_rows(doc: dict[str, Any]) -> list[Row]:
    ours, bare = doc["builds"][0], doc["builds"][1]
    pages = f"{doc['generated']['runbooks']} + {doc['generated']['articles']}"
    rows: list[Row] = [
        (f"site build, {pages} generated, with search: ms per page", f"{ours['ms_per_page']:.2f} ms",
         "<= 5 ms", doc["targets"]["ms_per_page_at_most_5"]),
        ("  ours / MkDocs (with search)", f"{doc['ratio']['ours_vs_mkdocs']:.2f}x", "<= 0.5x",
         doc["targets"]["at_most_half_of_mkdocs"]),
        ("  ours --no-search / MkDocs", f"{doc['ratio']['ours_no_search_vs_mkdocs']:.2f}x",
         f"{bare['ms_per_page']:.2f} ms/page", None)]
    for key, label in (("ours_rebuild_after_edit_vs_mkdocs", "  ours rebuild, 1 runbook edited / MkDocs"),
                       ("ours_pieces_cached_vs_mkdocs", "  ours, empty folder, pieces cached / MkDocs")):
        if key in doc["ratio"]:  # issue #28: the site with search in at most MkDocs' time
            rows.append((label, f"{doc['ratio'][key]:.2f}x", "<= 1.0x", doc["ratio"][key] <= 1.0))
    serve = doc.get("serve_rebuild") or {}
    for name in ("median", "largest"):
        if name in serve:
            saved = serve[name]
            rows.append((f"  site serve: one saved runbook ({name}, {saved['steps']} steps)",
                         f"{saved['median_ms']:.0f} ms", f"< {serve['target_ms']} ms",
                         saved["median_ms"] < serve["target_ms"]))
    return rows


def library_rows(doc: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    for command, verdict in doc["goals"].items():
        warm = doc["times"][command]["library warm"]["wall"]
        base = doc["times"][command]["builtin warm"]["wall"]
        figure = f"{command}, {doc['runbooks']:,} runbooks on RUNBOOK_PATH, warm"
        value = f"{warm:.2f} s" if command == "lint" else f"{verdict['ratio']}x ({warm:.2f} / {base:.2f} s)"
        rows.append((figure, value, verdict["goal"], verdict["met"]))
    return rows


def _pct(share: dict[str, Any] | None) -> str:
    return "-" if not share or share["pct"] is None else f"{share['pct']:.1f}%"


def diagnosis_rows(doc: dict[str, Any]) -> list[Row]:
    by = {s["source"]: s for s in doc["sources"]}
    rec, dev, holdout = by["recordings"], by["corpus dev"], by["corpus holdout"]
    return [
        (f"recordings, {rec['n']} nodes: conclusion / taxonomy right",
         f"{_pct(rec['conclusion_top1'])} / {_pct(rec['taxonomy_top1'])}", "higher", None),
        ("  recordings: walks ending at a generic conclusion", _pct(rec["generic"]), "lower", None),
        (f"triage dev, {dev['n']} logs: conclusion top-1 / top-3",
         f"{_pct(dev['conclusion_top1'])} / {_pct(dev['conclusion_top3'])}", "higher", None),
        (f"triage holdout, {holdout['n']} logs (as it comes): top-1 / top-3",
         f"{_pct(holdout['conclusion_top1'])} / {_pct(holdout['conclusion_top3'])}", "higher", None),
        ("  triage: generic answers, dev / holdout",
         f"{_pct(dev['generic'])} / {_pct(holdout['generic'])}", "lower", None)]


BENCHES = [
    Bench("startup", [PYTHON, "bench/startup.py", "--runs", "10", "--json"], startup_rows, 300),
    Bench("scale", [PYTHON, "bench/scale.py", "--nodes", "10000", "--json"], scale_rows, 600),
    Bench("streamed", [PYTHON, "bench/scale.py", "--nodes", "10000", "--batching", "--stream", "--json"],
          streamed_scale_rows, 600),
    Bench("fanout", [PYTHON, "bench/fanout/run.py", "--hosts", "32", "--repeat", "1", "--json"],
          fanout_rows, 900),
    Bench("site", [PYTHON, "bench/site/run.py", "--quick", "--json"], site_rows, 900),
    Bench("library", [PYTHON, "bench/library.py", "--runbooks", "1000", "--json"], library_rows, 900),
    Bench("reuse", [PYTHON, "bench/fanout/reuse.py", "--hosts", "32", "--repeat", "1", "--json"],
          reuse_rows, 900),
    Bench("broken", [PYTHON, "bench/library.py", "--broken", "--runbooks", "1000", "--json"],
          broken_lint_rows, 900),
    Bench("ray", [PYTHON, "bench/ray_fanout.py", "--nodes", "4", "--repeat", "1", "--json"], ray_rows, 900),
    Bench("diagnosis", [PYTHON, "bench/diagnosis.py", "--json"], diagnosis_rows, 600),
]


def run_bench(bench: Bench) -> tuple[list[Row], float]:
    started = time.perf_counter()
    try:
        done = subprocess.run(bench.argv, cwd=ROOT, stdout=subprocess.PIPE, text=True,
                              timeout=bench.timeout_s, env={**os.environ, "RUNBOOK_LANG": "en"})
    except subprocess.TimeoutExpired:
        return [("FAILED", f"over {bench.timeout_s:.0f} s", "", False)], time.perf_counter() - started
    took = time.perf_counter() - started
    try:
        doc = json.loads(done.stdout)
        return bench.rows(doc), took
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        why = f"exit {done.returncode}, no usable JSON ({type(exc).__name__}: {exc})"
        return [("FAILED", why, "", False)], took


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--only", nargs="+", choices=[b.name for b in BENCHES], help="run only these")
    parser.add_argument("--json", action="store_true", help="one JSON document instead of the table")
    args = parser.parse_args()
    results: dict[str, dict[str, Any]] = {}
    for bench in BENCHES:
        if args.only and bench.name not in args.only:
            continue
        print(f"bench/all.py: {bench.name} ...", file=sys.stderr, flush=True)
        rows, took = run_bench(bench)
        results[bench.name] = {"seconds": round(took, 1), "rows": rows}
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"\n{'benchmark':<10}{'figure':<58}{'value':>24}  {'goal':<18}met")
    for name, result in results.items():
        for figure, value, goal, met in result["rows"]:
            mark = "" if met is None else ("yes" if met else "NO")
            print(f"{name:<10}{figure:<58}{value:>24}  {goal:<18}{mark}")
    print(f"\n{os.cpu_count()} cores; " + ", ".join(f"{n} {r['seconds']:.0f} s" for n, r in results.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
