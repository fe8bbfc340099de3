"""Triage on real logs: accuracy on the corpus, speed against `grep -P`, peak memory.

    .venv/bin/python bench/triage.py [--size-mb 1024] [--json] [--show dev] [--decorated]
                                     [--added-since REV]

The corpus (tests/data/triage-corpus/, see its README) holds log excerpts copied verbatim
from public issue trackers, each labelled with the taxonomy ids a person would accept and
the conclusion they would want. It is split by a hash of the source URL into `dev` (about
70%, which signatures may be written against, and triage's known cases are made of) and
`holdout` (never looked at while tuning). Each log is triaged with every known case but its
own report's (triage/cases.py `KnownCases.without`): no log is answered by finding itself.

It prints, per split:
- top-1 / top-3: the first / any of the first three matches carries an accepted taxonomy id
  (error and stack-dump logs); the same for the accepted conclusions (`runbook:conclusion`);
- "nothing": error logs answered "no error found"; "said nothing useful": logs answered with
  neither a match nor advice (what the excerpt lacks, what to collect, what it resembles);
- no-error logs answered "no error found";
with --decorated, the conclusion top-1 again with every line of each log decorated as pastes
and collectors decorate them (a Markdown quote, HTML escapes, kubectl's pod prefix, a container
runtime's, srun's label): how much the answers rest on the log's exact layout;
with --added-since REV, each split again for the entries the corpus held at git revision REV
and for those added since (`holdout-new`: a fresh holdout, as it came);
and then, on a log of --size-mb built from the dev logs among training-progress lines,
triage's time per MB against `grep -P` with the same patterns (grep counts matching lines,
triage ranks them; PCRE2 cannot compile every pattern in one alternation, so grep scans once
per chunk of patterns, and its time is the sum of the scans), and triage's peak memory.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from triage_corpus import CORPUS, Entry, load_corpus

ROOT = Path(__file__).resolve().parents[1]


def judge(entries: list[Entry]) -> list[dict[str, object]]:
    sys.path.insert(0, str(ROOT / "engine"))
    from runbook.library.kb import load_kb
    from runbook.library.runbooks import load_library
    from runbook.triage.cases import shipped
    from runbook.triage.result import triage_sources
    from runbook.triage.sources import Source

    library, kb, cases = load_library(), load_kb(), shipped()
    rows = []
    for entry in entries:  # a dev log is compared with every known case but its own report's
        result = triage_sources(library, kb, [Source(str(entry.path.relative_to(ROOT)))],
                                on_warning=lambda m: None, cases=cases.without(entry.source))
        top = result.matches[:3]
        ok = [bool(set(m.taxonomy) & set(entry.taxonomy)) for m in top]
        accepted = entry.accepted_conclusions
        wanted = accepted[0] if accepted else None
        got = [f"{m.runbook}:{m.conclusion}" for m in top]
        rows.append({"log": str(entry.path.relative_to(CORPUS)), "split": entry.split, "kind": entry.kind,
                     "accepted": entry.taxonomy, "wanted": wanted, "verdict": result.verdict,
                     "says_something": bool(result.matches or result.advice or result.differences
                                            or result.readings),
                     # a log with no error line whose answer is what differs across its hosts
                     "compared": any(d["conclusion"] in accepted for d in result.differences),
                     # ... or what its numbers show (loss, learning rate, step time per rank)
                     "read_numbers": any(r["conclusion"] in accepted for r in result.readings),
                     "got": [[f"{m.runbook}:{m.conclusion}", m.role, m.taxonomy] for m in top],
                     "top1": bool(ok[:1] and ok[0]), "top3": any(ok),
                     "conclusion1": bool(got[:1] and got[0] in accepted),
                     "conclusion3": any(g in accepted for g in got)})
    return rows


# How pastes and log collectors decorate every line of a log (lognorm.py takes them off).
DECORATIONS = {
    "markdown-quote": lambda line: "> " + line,
    "html-escaped": lambda line: (line.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
                                  .replace('"', "&quot;").replace("'", "&#39;")),
    "kubectl-prefix": lambda line: "[pod/trainer-worker-1/pytorch] " + line,
    "container-runtime": lambda line: "2026-05-01T12:00:00.123456789Z stderr F " + line,
    "srun-label": lambda line: "3: " + line,
}


def decorated(entries: list[Entry]) -> list[dict[str, object]]:
    """Per split and decoration, the conclusion top-1 of the error logs with a conclusion."""
    sys.path.insert(0, str(ROOT / "engine"))
    from runbook.library.runbooks import load_library
    from runbook.triage.cases import shipped
    from runbook.triage.result import triage_text

    library, cases = load_library(), shipped()
    labelled = [e for e in entries if e.kind != "no-error" and e.accepted_conclusions]
    out = []
    for split in ("dev", "holdout"):
        mine = [e for e in labelled if e.split == split]
        texts = {e.path: e.path.read_text(encoding="utf-8", errors="replace").splitlines() for e in mine}
        row: dict[str, object] = {"split": split, "logs": len(mine)}
        for name, decorate in {"plain": lambda line: line, **DECORATIONS}.items():
            right = 0
            for entry in mine:
                result = triage_text(library, None, "\n".join(map(decorate, texts[entry.path])), "paste",
                                     cases=cases.without(entry.source))
                got = [f"{m.runbook}:{m.conclusion}" for m in result.matches[:1]]
                right += bool(got and got[0] in entry.accepted_conclusions)
            row[name] = round(100 * right / len(mine), 1) if mine else 0.0
        out.append(row)
    return out


def entries_at(rev: str) -> set[str]:
    """The corpus's logs (relative to it) at git revision `rev`."""
    folder = CORPUS.relative_to(ROOT).as_posix()
    listed = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, "--", folder],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)
    if listed.returncode != 0:
        raise SystemExit(f"--added-since {rev}: git cannot list the corpus there: {listed.stderr.strip()}")
    return {name[len(folder) + 1:] for name in listed.stdout.splitlines() if name.endswith(".log")}


def by_age(rows: list[dict[str, object]], rev: str) -> list[dict[str, object]]:
    """Each split's summary for the logs present at `rev` (`-old`) and those added since (`-new`)."""
    old = entries_at(rev)
    aged = [{**r, "split": f"{r['split']}-{'old' if r['log'] in old else 'new'}"} for r in rows]
    return [summarise(aged, f"{split}-{age}") for split in ("dev", "holdout") for age in ("old", "new")]


def summarise(rows: list[dict[str, object]], split: str) -> dict[str, object]:
    mine = [r for r in rows if r["split"] == split]
    errors = [r for r in mine if r["kind"] != "no-error"]
    clean = [r for r in mine if r["kind"] == "no-error"]
    with_conclusion = [r for r in errors if r["wanted"]]

    def share(part: list[dict[str, object]], key: str) -> float:
        return round(100 * sum(bool(r[key]) for r in part) / len(part), 1) if part else 0.0

    return {"split": split, "logs": len(mine), "error_logs": len(errors), "no_error_logs": len(clean),
            "top1_pct": share(errors, "top1"), "top3_pct": share(errors, "top3"),
            "conclusion_top1_pct": share(with_conclusion, "conclusion1"),
            "conclusion_top3_pct": share(with_conclusion, "conclusion3"),
            "answered_nothing": sum(r["verdict"] == "no-error" for r in errors),
            "said_nothing_useful": sum(not r["says_something"] for r in mine),
            "no_error_logs_answered_no_error": sum(r["verdict"] == "no-error" for r in clean),
            "no_error_logs_with_a_conclusion": sum(bool(r["wanted"]) for r in clean),
            # of those, named first (by what differs, the numbers, a dump, or where the paste stops)
            "no_error_conclusion_top1": sum(bool(r["wanted"]) and bool(r["conclusion1"]) for r in clean),
            "named_by_comparing_hosts": sum(bool(r["compared"]) for r in clean),
            "named_by_reading_numbers": sum(bool(r["read_numbers"]) for r in clean)}


def big_log(entries: list[Entry], size_mb: int, out: Path) -> None:
    """A log of `size_mb` MB: dev logs spread among training-progress lines."""
    errors = [e.path.read_text(encoding="utf-8", errors="replace") for e in entries if e.split == "dev"]
    filler = "".join(f"[rank{r}]:2026-11-26 10:{r:02d}:{s:02d} INFO step {s * 7 + r} | loss 2.{s:03d} | "
                     f"lr 3.0e-4 | grad_norm 0.{r}{s} | tokens/s 41{s:03d}\n"
                     for r in range(8) for s in range(60))
    chunk = (filler * 40 + "".join(errors)).encode("utf-8")
    with out.open("wb") as fh:
        for _ in range(max(1, size_mb * (1 << 20) // len(chunk))):
            fh.write(chunk)


def grep_patterns() -> list[str]:
    """Every signature as its own `grep -P` alternative, `(?i)` made local to it."""
    sys.path.insert(0, str(ROOT / "engine"))
    from runbook.library.runbooks import load_library

    parts = []
    for runbook in load_library().runbooks():
        for signature in runbook.signatures:
            source = signature.pattern
            if source.startswith("(?i)"):
                source = "(?i:" + source[4:] + ")"
            parts.append(f"(?:{source})")
    return parts


GREP_CHUNK_CHARS = 12_000  # under PCRE2's compiled-pattern limit, which all patterns in one alternation pass


def grep_chunks(parts: list[str]) -> list[str]:
    """The signatures' patterns as few alternations as `grep -P` compiles: all of them in one
    does not (`regular expression is too large` since the library passed about 330 signatures)."""
    chunks: list[str] = []
    for part in parts:
        if chunks and len(chunks[-1]) + 1 + len(part) <= GREP_CHUNK_CHARS:
            chunks[-1] += "|" + part
        else:
            chunks.append(part)
    return chunks


def speed(entries: list[Entry], size_mb: int) -> dict[str, object]:
    """triage against `grep -P` on the same log. grep cannot take every pattern in one scan: it
    scans once per chunk of patterns, and its time is the sum, what it takes grep to find the
    lines any signature matches (the slowest chunk's scan is printed beside it)."""
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "big.log"
        big_log(entries, size_mb, log)
        megabytes = log.stat().st_size / (1 << 20)
        begin = time.perf_counter()
        subprocess.run([sys.executable, "-m", "runbook", "triage", str(log), "--format", "json"],
                       check=False, capture_output=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT / "engine")})
        triage_s = time.perf_counter() - begin
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        scans, codes = [], []
        for chunk in grep_chunks(grep_patterns()):
            begin = time.perf_counter()
            grep = subprocess.run(["grep", "-P", "-c", chunk, str(log)], check=False,
                                  capture_output=True, text=True)
            scans.append(time.perf_counter() - begin)
            codes.append(grep.returncode)
        grep_s = sum(scans)
    return {"log_mb": round(megabytes, 1), "triage_s": round(triage_s, 2), "grep_s": round(grep_s, 2),
            "grep_scans": len(scans), "grep_slowest_scan_s": round(max(scans), 2),
            "triage_ms_per_mb": round(1000 * triage_s / megabytes, 2),
            "grep_ms_per_mb": round(1000 * grep_s / megabytes, 2),
            "triage_over_grep": round(triage_s / grep_s, 2) if grep_s else None,
            "grep_rc": max(codes), "triage_peak_mb": round(peak_mb, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=1024, help="size of the speed log (0: skip)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--decorated", action="store_true",
                        help="also the conclusion top-1 with every line decorated as pastes decorate it")
    parser.add_argument("--added-since", metavar="REV",
                        help="also each split for the logs present at git revision REV and those added since")
    parser.add_argument("--show", choices=("dev", "holdout", "all"),
                        help="list the logs answered wrongly in this split (don't look at holdout to tune)")
    args = parser.parse_args()
    entries = load_corpus()
    rows = judge(entries)
    report: dict[str, object] = {"splits": [summarise(rows, s) for s in ("dev", "holdout")]}
    if args.added_since:
        report["splits"] += by_age(rows, args.added_since)  # type: ignore[operator]
    if args.decorated:
        report["decorated"] = decorated(entries)
    if args.size_mb:
        report["speed"] = speed(entries, args.size_mb)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for part in report["splits"]:  # type: ignore[attr-defined]
            print(" ".join(f"{k}={v}" for k, v in part.items()))
        for part in report.get("decorated", []):  # type: ignore[attr-defined]
            print("decorated " + " ".join(f"{k}={v}" for k, v in part.items()))
        if "speed" in report:
            print(" ".join(f"{k}={v}" for k, v in report["speed"].items()))  # type: ignore[attr-defined]
    if args.show:
        for row in rows:
            shown = args.show == "all" or row["split"] == args.show
            if shown and not row["top1"] and row["kind"] != "no-error":
                print(json.dumps(row, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
