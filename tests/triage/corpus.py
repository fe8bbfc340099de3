"""bench/triage_corpus.py, the triage corpus's loader and its dev/holdout split, for the tests
(bench/ is no package: it is loaded from its file)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "triage_corpus", Path(__file__).resolve().parents[2] / "bench" / "triage_corpus.py")
assert _spec and _spec.loader
triage_corpus = importlib.util.module_from_spec(_spec)
sys.modules["triage_corpus"] = triage_corpus  # its dataclasses look their module up
_spec.loader.exec_module(triage_corpus)
