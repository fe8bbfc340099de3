"""Write engine/runbook/data/known_cases.json from the triage corpus's `dev` split.

    .venv/bin/python scripts/known_cases.py [--check]

Each `dev` log with an error (or a stack dump) and a labelled conclusion becomes one known case:
its source URL, its accepted conclusions (the wanted one first) and the terms triage compares a
log by (triage/cases.py `case_terms`, read from the log the way `runbook triage` reads it). The
`holdout` logs are left out, so they keep measuring logs nobody has seen. Run it after adding
corpus entries or changing how triage reads a log; `--check` exits 1 when the file is stale
(tests/triage/test_known_cases.py runs it).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "engine"), str(ROOT / "bench")]

from triage_corpus import CORPUS, load_corpus  # noqa: E402

from runbook.library.runbooks import load_library  # noqa: E402
from runbook.triage.cases import CASES_FILE, SCHEMA, KnownCases  # noqa: E402
from runbook.triage.result import triage_sources  # noqa: E402
from runbook.triage.sources import Source  # noqa: E402


def build() -> str:
    """The file's text, from the corpus as it is now."""
    library, none = load_library([ROOT / "runbooks"]), KnownCases.empty()
    cases = []
    for entry in load_corpus():
        if entry.split != "dev" or entry.kind == "no-error" or not entry.accepted_conclusions:
            continue
        result = triage_sources(library, None, [Source(str(entry.path))], on_warning=lambda m: None,
                                cases=none)
        cases.append({"entry": str(entry.path.relative_to(CORPUS).with_suffix("")),
                      "source": entry.source.strip(), "conclusions": entry.accepted_conclusions,
                      "terms": dict(sorted(result.terms.items()))})
    head = json.dumps({"schema": SCHEMA, "built_by": "scripts/known_cases.py (do not edit)"},
                      ensure_ascii=False)[:-1]
    # one case a line: a changed corpus entry is a changed line in a diff
    lines = ",\n".join(json.dumps(case, ensure_ascii=False, separators=(",", ":")) for case in cases)
    return f'{head}, "cases": [\n{lines}\n]}}\n'


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file differs from a new build")
    args = parser.parse_args()
    text = build()
    if args.check:
        current = CASES_FILE.read_text(encoding="utf-8") if CASES_FILE.is_file() else ""
        if current != text:
            print(f"{CASES_FILE.relative_to(ROOT)} is stale: run .venv/bin/python scripts/known_cases.py")
            return 1
        return 0
    CASES_FILE.write_text(text, encoding="utf-8")
    print(f"{CASES_FILE.relative_to(ROOT)}: {len(json.loads(text)['cases'])} cases, {len(text) // 1024} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
