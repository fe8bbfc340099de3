"""bench/diagnosis.py: it replays a recording and triages a corpus log against their labels and
prints its fields; every recording's label file is well formed and names what exists; the label
files are never read as runbooks."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

from runbook.format import taxonomy
from runbook.library.runbooks import load_library, runbook_files

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_diagnosis", ROOT / "bench" / "diagnosis.py")
assert _spec and _spec.loader
bench = importlib.util.module_from_spec(_spec)
sys.modules["bench_diagnosis"] = bench  # its dataclasses look their module up
_spec.loader.exec_module(bench)

ONE = ["--recording", "cuda_oom", "--log", "accelerate/1192-*"]


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "bench/diagnosis.py", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, env={**os.environ, "RUNBOOK_LANG": "en"})


def test_one_recording_and_one_log_measured_as_json() -> None:
    done = _bench(*ONE, "--json", "--show", "recordings")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    rows = {row["source"]: row for row in doc["sources"]}
    assert set(rows) == {"recordings", "corpus dev", "corpus holdout"}
    recordings = rows["recordings"]
    assert recordings["n"] == 1 and recordings["unlabelled"] == 0
    assert set(recordings["conclusion_top1"]) == {"n", "of", "pct"} and recordings["conclusion_top3"] is None
    assert {"taxonomy_top1", "generic"} <= set(recordings)
    [node] = doc["recordings"]
    assert node["recording"] == "cuda_oom" and node["expected"] == "cuda-oom:oom-batch-or-model"
    assert node["got"].startswith("cuda-oom:") or node["got"].startswith("status ")
    corpus = [row for row in doc["sources"] if row["source"].startswith("corpus")]
    assert sum(row["n"] for row in corpus) == 1
    assert all(set(row["conclusion_top3"]) == {"n", "of", "pct"} for row in corpus)
    assert "never tuned" in doc["holdout"] and doc["generic_ids"]
    assert isinstance(doc["misses"], list) and isinstance(doc["generic_counted"], list)


def test_the_table_names_every_source_and_column() -> None:
    done = _bench(*ONE)
    assert done.returncode == 0, done.stderr
    for text in ("conclusion top-1", "top-3", "taxonomy top-1", "generic share", "recordings",
                 "corpus dev", "corpus holdout", "never tuned against"):
        assert text in done.stdout, text


def test_a_missing_engine_root_is_a_failed_run() -> None:
    done = _bench(*ONE, "--engine-root", str(ROOT / "no-such-checkout"))
    assert done.returncode == 1 and "bench/diagnosis.py:" in done.stderr


def test_every_recording_has_labels_naming_its_nodes_and_known_ids() -> None:
    library = load_library([ROOT / "runbooks"])
    known = set(taxonomy.load())
    for incident in sorted(bench.RECORDINGS.glob("*/incident.json")):
        labels = bench.load_labels(incident.parent)
        assert labels, (f"write runbooks/recordings/{incident.parent.name}/{bench.LABELS_FILE}: what a "
                        "person concludes per node (bench/README.md, Diagnosis)")
        nodes = {n["node"] for n in json.loads(incident.read_text("utf-8"))["nodes"]}
        assert set(labels) - {bench.ANY_NODE} <= nodes, incident.parent.name
        assert all(bench.label_for(labels, node) for node in nodes), incident.parent.name
        for label in labels.values():
            assert set(label.taxonomy) <= known, (incident.parent.name, label.taxonomy)
            for qualified in ([label.expected] if label.conclusion else []) + label.also:
                rid, _, cid = qualified.partition(":")
                assert library.get(rid) is not None, (incident.parent.name, qualified)


def test_label_files_are_not_runbooks() -> None:
    files = runbook_files([ROOT / "runbooks"])
    assert not [f for f in files if f.name == bench.LABELS_FILE or "recordings" in f.parts]


def test_generic_by_id_and_by_the_librarys_mark() -> None:
    class Marked:
        generic = True

    class Library:
        def get(self, rid: str) -> object:
            return type("R", (), {"conclusions": {"specific": Marked()}})()

    engine = object.__new__(bench.Engine)
    engine.library = Library()
    assert bench.generic_reason(engine, "training-hang:log-stalled") == "id"
    assert bench.generic_reason(engine, "nccl-errors:no-nccl-fault-found") == "id"
    assert bench.generic_reason(engine, "nccl-errors:system-error-unexplained") == "id"
    assert bench.generic_reason(engine, "x:specific") == "marked"
    assert bench.generic_reason(engine, "cli-args:unknown-option") is None
    assert bench.generic_reason(engine, "cuda-oom:oom-batch-or-model") is None
