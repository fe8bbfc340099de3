"""How specific and how right the verdicts are: every recording and the triage corpus, against a person.

    .venv/bin/python bench/diagnosis.py [--json] [--show recordings|dev] [--engine-root PATH]

Two sources of cases, each labelled by hand with the conclusion an experienced engineer reaches:

- recordings: every `runbooks/recordings/<name>/incident.json` (incidents recorded from the
  scenarios) is replayed through the library with the engine's own replay (run/replay.py, as
  `runbook test` does); each node's conclusion is compared with `<name>/labels.yml`;
- the triage corpus (tests/data/triage-corpus/, its loader and its dev/holdout split imported
  from bench/triage_corpus.py): `runbook triage` on every log; the top answer is compared with the
  entry's `runbook`/`conclusion`. Holdout is reported as it comes: never tuned against.

It prints, per source: conclusion-level accuracy (`runbook:conclusion` exact; top-3 too for
triage), taxonomy-level accuracy beside it, and the share of answers that are generic: a
conclusion the library marks `generic: true`, or whose id reads as one (`log-stalled`,
`*-unexplained`, `no-*-found`, `*-unknown`, `unknown-*`); for triage also an answer that is only
"similar" (text similarity) or "nothing found". It lists the generic conclusions it counted.

`--engine-root PATH` measures another checkout (`git worktree add /tmp/before COMMIT`): its
`engine/` is imported and its `runbooks/` and `kb/` are the library, while the recordings, their
labels and the corpus stay this tree's, so two commits are measured on the same cases.

Exit status 0 even when the numbers are poor; 1 when a run failed (the engine would not import,
a runbook file did not load, a recording or a label file could not be read, triage raised).
"""

from __future__ import annotations

import argparse
import fnmatch
import importlib
import importlib.util
import json
import subprocess
import sys
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
RECORDINGS = ROOT / "runbooks" / "recordings"
LABELS_FILE = "labels.yml"  # not *.yaml: the library loads every *.yaml under runbooks/ as a runbook
ANY_NODE = "*"  # the label of every node a label file does not name
GENERIC_IDS = ("log-stalled", "*-unexplained", "no-*-found", "*-unknown", "unknown-*")
SPECIFIC_DESPITE_ID = ("cli-args:unknown-option",)  # an option name that does not exist: specific
LABEL_KEYS = {"runbook", "conclusion", "status", "taxonomy", "why", "also", "exists"}
NOTHING, SIMILAR = "nothing found", "similar"
HOLDOUT_NOTE = "holdout is reported as it comes: never tuned against, its misses never shown"


def _triage_corpus() -> ModuleType:
    """bench/triage_corpus.py, for its corpus loader and its split rule (one copy of each)."""
    spec = importlib.util.spec_from_file_location("triage_corpus", ROOT / "bench" / "triage_corpus.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["triage_corpus"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


# -- labels --

@dataclass
class Label:
    """What a person concludes for one node: a conclusion, or a status such as `unreachable`."""

    runbook: str | None
    conclusion: str | None
    status: str | None
    taxonomy: list[str]
    why: str
    also: list[str] = field(default_factory=list)  # other `runbook:conclusion` a person accepts

    @property
    def expected(self) -> str:
        return f"{self.runbook}:{self.conclusion}" if self.conclusion else f"status {self.status}"

    def accepts(self, got: str) -> bool:
        return got == self.expected or got in self.also


class LabelError(ValueError):
    """A label file that cannot be read; the message names the file and the field."""


def load_labels(folder: Path) -> dict[str, Label] | None:
    """node -> Label from `folder/labels.yml` (`*` for every other node); None when absent."""
    path = folder / LABELS_FILE
    if not path.is_file():
        return None
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise LabelError(f"{path}: {exc}") from None
    nodes = doc.get("nodes") if isinstance(doc, dict) else None
    if not isinstance(nodes, dict) or not nodes:
        raise LabelError(f"{path}: nodes: expected a mapping of node -> label")
    return {str(node): _label(path, str(node), raw) for node, raw in nodes.items()}


def _label(path: Path, node: str, raw: Any) -> Label:
    """One node's label, checked (LabelError says which field is wrong)."""
    where = f"{path}: nodes.{node}"
    if not isinstance(raw, dict) or not raw.get("why"):
        raise LabelError(f"{where}: expected a mapping with `why`")
    if set(raw) - LABEL_KEYS:
        raise LabelError(f"{where}: unknown key(s) {sorted(set(raw) - LABEL_KEYS)}")
    if bool(raw.get("conclusion")) == bool(raw.get("status")):
        raise LabelError(f"{where}: give `runbook` and `conclusion`, or `status`")
    if raw.get("conclusion") and not (raw.get("runbook") and isinstance(raw.get("taxonomy"), list)):
        raise LabelError(f"{where}: a conclusion needs `runbook` and `taxonomy` (a list)")
    return Label(raw.get("runbook"), raw.get("conclusion"), raw.get("status"),
                 list(raw.get("taxonomy") or []), str(raw["why"]), list(raw.get("also") or []))


def label_for(labels: dict[str, Label], node: str) -> Label | None:
    """The node's own label, else the label of every other node (`*`), else None."""
    return labels.get(node) or labels.get(ANY_NODE)


# -- the engine under measure --

class Engine:
    """The `runbook` package of one checkout, with that checkout's runbooks and articles."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        sys.path.insert(0, str(self.root / "engine"))
        package = importlib.import_module("runbook")
        imported = Path(package.__file__ or "").resolve()
        if self.root / "engine" not in imported.parents:
            raise RuntimeError(f"runbook was imported from {imported}, not from {self.root}/engine")
        runbooks = importlib.import_module("runbook.library.runbooks")
        kb = importlib.import_module("runbook.library.kb")
        self.recording = importlib.import_module("runbook.run.recording")
        self.replay_module = importlib.import_module("runbook.run.replay")
        self.triage_result = importlib.import_module("runbook.triage.result")
        self.source_type = importlib.import_module("runbook.triage.sources").Source
        # an engine with known cases compares each corpus log with every case but its own report's
        self.known_cases = (importlib.import_module("runbook.triage.cases").shipped()
                            if (self.root / "engine" / "runbook" / "triage" / "cases.py").is_file() else None)
        self.library = runbooks.load_library([self.root / "runbooks"])
        self.kb = kb.load_kb([self.root / "kb"])
        broken = [r for r in self.library.results if r.runbook is None]
        if broken:  # a half-loaded library would be measured as misses
            first = broken[0].problems[0] if broken[0].problems else "does not load"
            raise RuntimeError(f"{len(broken)} runbook file(s) do not load, first {broken[0].path}: {first}")

    def conclusion(self, qualified: str) -> Any:
        """The library's conclusion `runbook:id`, or None."""
        rid, _, cid = qualified.partition(":")
        runbook = self.library.get(rid)
        return runbook.conclusions.get(cid) if runbook is not None else None

    def replay(self, incident: Path) -> Any:
        """The engine's own replay of one recording (raises KeyError: runbook not in the library)."""
        return self.replay_module.replay(self.library, self.recording.load_recording(incident))

    def triage(self, log: Path, source: str) -> Any:
        """`runbook triage LOG` through the library's own functions (as bench/triage.py calls them),
        `source` (the report the log was copied from) left out of the known cases."""
        if self.known_cases is None:
            return self.triage_result.triage_sources(self.library, self.kb, [self.source_type(str(log))],
                                                     on_warning=lambda message: None)
        return self.triage_result.triage_sources(self.library, self.kb, [self.source_type(str(log))],
                                                 on_warning=lambda message: None,
                                                 cases=self.known_cases.without(source))


def generic_reason(engine: Engine, qualified: str) -> str | None:
    """Why `runbook:conclusion` is generic (`marked`, or `id` when its id reads so), else None."""
    if getattr(engine.conclusion(qualified), "generic", None) is True:
        return "marked"
    cid = qualified.partition(":")[2]
    if qualified in SPECIFIC_DESPITE_ID:
        return None
    return "id" if any(fnmatch.fnmatchcase(cid, pattern) for pattern in GENERIC_IDS) else None


# -- recordings --

@dataclass
class NodeRow:
    recording: str
    node: str
    expected: str | None  # None: the recording has no label for this node
    got: str  # `runbook:conclusion`, or `status S`, or `incomplete: ...`
    got_taxonomy: list[str]
    path: list[str]
    hit: bool
    taxonomy_hit: bool
    generic: str | None  # why the answer is generic, else None
    why: str = ""


def recording_rows(engine: Engine, only: list[str] | None) -> list[NodeRow]:
    """Replay every recording of this tree (or the named ones) and compare each node with its label."""
    rows: list[NodeRow] = []
    for incident in sorted(RECORDINGS.glob(f"*/{engine.recording.FILE}")):
        if only and incident.parent.name not in only:
            continue
        labels = load_labels(incident.parent) or {}
        rows.extend(_replayed(engine, incident, labels))
    return rows


def _replayed(engine: Engine, incident: Path, labels: dict[str, Label]) -> list[NodeRow]:
    """One row per node of one replayed recording (a step it lacks: `incomplete`, a miss)."""
    name = incident.parent.name
    try:
        done = engine.replay(incident)
    except KeyError as exc:  # the recording's runbook is not in this library
        recording = engine.recording.load_recording(incident)
        return [_row(engine, name, n.name, label_for(labels, n.name), f"no runbook {exc}", [], [], None)
                for n in recording.nodes]
    incomplete = {v.node: v.missing for v in done.verdicts if v.missing}
    rows = []
    for outcome in done.outcomes:
        node = outcome.node.name
        got, taxonomy, qualified = _got(done.recording.runbook_id, outcome)
        if node in incomplete:
            got, taxonomy, qualified = f"incomplete: the recording lacks step {incomplete[node]}", [], None
        rows.append(_row(engine, name, node, label_for(labels, node), got, taxonomy, outcome.path, qualified))
    return rows


def _got(root: str, outcome: Any) -> tuple[str, list[str], str | None]:
    """(what the node ended at, its taxonomy, `runbook:conclusion` or None)."""
    if outcome.conclusion is None:
        return f"status {outcome.status}", [], None
    owner = outcome.conclusion_runbook.id if outcome.conclusion_runbook is not None else root
    qualified = f"{owner}:{outcome.conclusion.id}"
    return qualified, list(outcome.conclusion.taxonomy), qualified


def _row(engine: Engine, recording: str, node: str, label: Label | None, got: str,
         taxonomy: list[str], path: list[str], qualified: str | None) -> NodeRow:
    """A node's end compared with its label (None: unlabelled, not scored)."""
    hit = label is not None and label.accepts(got)
    return NodeRow(recording, node, label.expected if label else None, got, taxonomy, list(path), hit,
                   label is not None and (hit or _taxonomy_hit(label.taxonomy, taxonomy, qualified)),
                   generic_reason(engine, qualified) if qualified else None, label.why if label else "")


def _taxonomy_hit(wanted: list[str], got: list[str], qualified: str | None) -> bool:
    """Some taxonomy id in common; a label without taxonomy (healthy, nothing wrong) wants none."""
    if not wanted:
        return qualified is not None and not got
    return bool(set(wanted) & set(got))


# -- the triage corpus --

@dataclass
class LogRow:
    log: str
    split: str
    kind: str
    wanted: str | None  # `runbook:conclusion`; None: the entry names no conclusion
    verdict: str
    got: list[str]  # the first three answers, `runbook:conclusion`
    top1: bool
    top3: bool
    taxonomy_top1: bool
    generic: str | None  # why the top answer is generic, else None


def corpus_rows(engine: Engine, corpus: ModuleType, only: list[str] | None) -> list[LogRow]:
    """`runbook triage` on every corpus log (or those matching the globs); one row each."""
    rows = []
    for entry in corpus.load_corpus():
        name = str(entry.path.relative_to(corpus.CORPUS))
        if only and not any(fnmatch.fnmatchcase(name, pattern) for pattern in only):
            continue
        rows.append(_triaged(engine, entry, name))
    return rows


def _triaged(engine: Engine, entry: Any, name: str) -> LogRow:
    """One corpus log triaged, its first three answers compared with the entry's labels."""
    result = engine.triage(entry.path, entry.source)
    top = result.matches[:3]
    got = [f"{m.runbook}:{m.conclusion}" for m in top]
    wanted = f"{entry.runbook}:{entry.conclusion}" if entry.conclusion else None
    taxonomy_top1 = bool(top) and bool(set(top[0].taxonomy) & set(entry.taxonomy))
    return LogRow(name, entry.split, entry.kind, wanted, result.verdict, got,
                  bool(wanted) and got[:1] == [wanted], bool(wanted) and wanted in got, taxonomy_top1,
                  _answer_generic(engine, result))


def _answer_generic(engine: Engine, result: Any) -> str | None:
    """Why triage's top answer is generic: nothing found, only similar, or a generic conclusion."""
    if not result.matches:
        return NOTHING
    if result.verdict == SIMILAR or result.matches[0].role == SIMILAR:
        return SIMILAR
    first = result.matches[0]
    return generic_reason(engine, f"{first.runbook}:{first.conclusion}")


# -- summaries --

def _share(part: int, whole: int) -> dict[str, Any]:
    """`part` of `whole`, with the percentage (None of nothing)."""
    return {"n": part, "of": whole, "pct": round(100 * part / whole, 1) if whole else None}


def summarise_recordings(rows: list[NodeRow]) -> dict[str, Any]:
    """The recordings' row: labelled nodes scored; the generic share of every walk."""
    scored = [r for r in rows if r.expected is not None]
    return {"source": "recordings", "n": len(scored), "unlabelled": len(rows) - len(scored),
            "conclusion_top1": _share(sum(r.hit for r in scored), len(scored)), "conclusion_top3": None,
            "taxonomy_top1": _share(sum(r.taxonomy_hit for r in scored), len(scored)),
            "generic": _share(sum(r.generic is not None for r in rows), len(rows))}


def summarise_corpus(rows: list[LogRow], split: str) -> dict[str, Any]:
    """Scored: error and stack-dump logs with a labelled conclusion. Generic share: of every
    error and stack-dump log's top answer (a no-error log is rightly answered "nothing found")."""
    mine = [r for r in rows if r.split == split]
    failing = [r for r in mine if r.kind != "no-error"]
    scored = [r for r in failing if r.wanted]
    return {"source": f"corpus {split}", "n": len(scored), "unlabelled": len(failing) - len(scored),
            "no_error_logs": len(mine) - len(failing),
            "conclusion_top1": _share(sum(r.top1 for r in scored), len(scored)),
            "conclusion_top3": _share(sum(r.top3 for r in scored), len(scored)),
            "taxonomy_top1": _share(sum(r.taxonomy_top1 for r in scored), len(scored)),
            "generic": _share(sum(r.generic is not None for r in failing), len(failing))}


def generic_counted(nodes: list[NodeRow], logs: list[LogRow]) -> list[dict[str, Any]]:
    """Each generic answer that was given: what, why generic, how often in walks and in triage."""
    walks = Counter((r.got, r.generic) for r in nodes if r.generic)
    failing = [r for r in logs if r.kind != "no-error" and r.generic]
    answers = Counter(((r.got[0] if r.generic not in (NOTHING, SIMILAR) else r.generic), r.generic)
                      for r in failing)
    keys = sorted(set(walks) | set(answers))
    return [{"answer": answer, "why": why, "walks": walks[(answer, why)], "triage": answers[(answer, why)]}
            for answer, why in keys]


def missing_conclusions(engine: Engine, rows: list[NodeRow]) -> dict[str, int]:
    """Labelled conclusions this library lacks (the label's `exists: false`, or renamed since)."""
    lacking = Counter(r.expected for r in rows if r.expected and not r.expected.startswith("status ")
                      and engine.conclusion(r.expected) is None)
    return dict(sorted(lacking.items()))


# -- output --

def checkout(root: Path, paths: tuple[str, ...]) -> str:
    """`COMMIT` of a checkout, `+changes` when `paths` differ from it there."""
    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=False)
        return done.stdout.strip() if done.returncode == 0 else ""
    commit = git("rev-parse", "--short=12", "HEAD") or "unknown"
    return commit + (" +changes" if git("status", "--porcelain", "--", *paths) else "")


def _cell(share: dict[str, Any] | None) -> str:
    """`n/of pct%`, or `-` where the figure does not apply."""
    if share is None:
        return "-"
    pct = "-" if share["pct"] is None else f"{share['pct']:.1f}%"
    return f"{share['n']}/{share['of']} {pct}"


def print_table(report: dict[str, Any]) -> None:
    """The table, the generic answers counted and the conclusions the library lacks."""
    print(f"engine and library: {report['engine']['root']} ({report['engine']['commit']}); "
          f"recordings, labels, corpus: {report['cases']['root']} ({report['cases']['commit']})")
    print(f"\n{'source':<16}{'n':>5}  {'conclusion top-1':<18}{'top-3':<18}{'taxonomy top-1':<18}"
          f"{'generic share':<18}unlabelled")
    for row in report["sources"]:
        print(f"{row['source']:<16}{row['n']:>5}  {_cell(row['conclusion_top1']):<18}"
              f"{_cell(row['conclusion_top3']):<18}{_cell(row['taxonomy_top1']):<18}"
              f"{_cell(row['generic']):<18}{row['unlabelled']}")
    print(f"\n{HOLDOUT_NOTE}.")
    print("n: scored cases (recording nodes with a label; error and stack-dump logs whose entry names a "
          "conclusion).\ngeneric share: of every walk, and of the top answer to every error and "
          "stack-dump log.")
    print("\ngeneric answers counted (answer, why generic, walks, triage answers):")
    for item in report["generic_counted"]:
        print(f"  {item['answer']:<48}{item['why']:<15}{item['walks']:>4}{item['triage']:>6}")
    if report["missing_conclusions"]:
        print("\nlabelled conclusions this library lacks (each a miss):")
        for qualified, count in report["missing_conclusions"].items():
            print(f"  {qualified} ({count} node{'s' if count > 1 else ''})")


def misses(report: dict[str, Any], logs: list[LogRow], show: str) -> list[dict[str, Any]]:
    """The misses of `recordings` or of `dev` (never holdout's), expected against got."""
    if show == "recordings":
        return [{"recording": r["recording"], "node": r["node"], "expected": r["expected"], "got": r["got"],
                 "taxonomy_hit": r["taxonomy_hit"], "path": r["path"], "why": r["why"]}
                for r in report["recordings"] if r["expected"] is not None and not r["hit"]]
    return [{"log": r.log, "expected": r.wanted, "got": r.got, "verdict": r.verdict,
             "taxonomy_top1": r.taxonomy_top1}
            for r in logs if r.split == "dev" and r.kind != "no-error" and r.wanted and not r.top1]


def measure(engine: Engine, args: argparse.Namespace) -> tuple[dict[str, Any], list[LogRow]]:
    """The report (JSON-ready), and the corpus rows it summarises."""
    corpus = _triage_corpus()
    nodes = recording_rows(engine, args.recording)
    logs = corpus_rows(engine, corpus, args.log)
    engine_paths = ("engine", "runbooks", "kb")
    case_paths = ("runbooks/recordings", "tests/data/triage-corpus")
    return {"engine": {"root": str(engine.root), "commit": checkout(engine.root, engine_paths)},
            "cases": {"root": str(ROOT), "commit": checkout(ROOT, case_paths)},
            "sources": [summarise_recordings(nodes), summarise_corpus(logs, "dev"),
                        summarise_corpus(logs, "holdout")],
            "holdout": HOLDOUT_NOTE, "generic_ids": list(GENERIC_IDS),
            "generic_counted": generic_counted(nodes, logs),
            "missing_conclusions": missing_conclusions(engine, nodes),
            "recordings": [asdict(r) for r in nodes]}, logs


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (see the module's docstring)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--show", choices=("recordings", "dev"),
                        help="list the misses, expected against got (holdout's are never shown)")
    parser.add_argument("--engine-root", type=Path, default=ROOT,
                        help="the checkout whose engine/, runbooks/ and kb/ are measured (default: this one)")
    parser.add_argument("--recording", action="append", metavar="NAME",
                        help="only this recording (repeatable)")
    parser.add_argument("--log", action="append", metavar="GLOB",
                        help="only corpus logs whose path under the corpus matches (repeatable)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Measure, print; 0 whatever the numbers, 1 when the run failed."""
    args = parse_args(argv)
    try:
        engine = Engine(args.engine_root)
        report, logs = measure(engine, args)
    except Exception as exc:  # a run that failed: say what, exit 1
        print(f"bench/diagnosis.py: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    shown = misses(report, logs, args.show) if args.show else None
    if args.json:
        print(json.dumps({**report, "misses": shown}, indent=2, ensure_ascii=False))
        return 0
    print_table(report)
    if shown is not None:
        print(f"\nmisses ({args.show}):")
        for miss in shown:
            print(json.dumps(miss, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
