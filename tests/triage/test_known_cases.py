"""Known cases (triage/cases.py): the labelled public reports a log resembles, as `similar` matches."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from runbook.format.model import Text
from runbook.library.runbooks import load_library
from runbook.triage.cases import CASES_FILE, Case, KnownCases, case_terms, shipped
from runbook.triage.hits import LineHit
from runbook.triage.result import _fused, triage_sources, triage_text
from runbook.triage.sources import Source
from runbook.triage.verdict import Match
from tests.triage.corpus import triage_corpus as corpus

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = load_library([ROOT / "runbooks"])


def _cases(*items: tuple[str, str, str]) -> KnownCases:
    """Cases from (source, conclusion, text)."""
    return KnownCases([Case(source, (conclusion,), source) for source, conclusion, _ in items],
                      [case_terms(text.splitlines()) for _, _, text in items])


SHM, OOM = "nccl-errors:shm-too-small", "cuda-oom:oom-batch-or-model"
FOUR = _cases(
    ("https://example.org/1", SHM, "ncclSystemError shm_open /dev/shm no space docker"),
    ("https://example.org/2", SHM, "NCCL shm /dev/shm docker container shm-size 64m"),
    ("https://example.org/3", OOM, "CUDA out of memory tried to allocate batch size"),
    ("https://example.org/4", "ray-hang:object-store-full", "ray object store full spilling plasma"))


def test_the_shipped_file_is_built_from_the_corpus_as_it_is() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "known_cases.py"), "--check"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_only_dev_reports_are_cases_and_every_conclusion_exists() -> None:
    data = json.loads(CASES_FILE.read_text(encoding="utf-8"))
    sources = {case["source"] for case in data["cases"]}
    dev = {e.source.strip() for e in corpus.load_corpus() if e.split == "dev" and e.kind != "no-error"}
    assert sources and sources <= dev  # the holdout keeps measuring logs nobody has seen
    for case in data["cases"]:
        runbook, _, conclusion = case["conclusions"][0].partition(":")
        assert conclusion in LIBRARY.get(runbook).conclusions, case["entry"]


def test_the_terms_leave_out_numbers_and_addresses() -> None:
    terms = case_terms(["step 1200 pid 48121 at 0x7f3a2b1c0740 on h100 with cuda12 sm_90 NCCL 2.21.5"])
    assert {"step", "pid", "h100", "cuda12", "sm_90", "nccl"} <= set(terms)
    assert not {"1200", "48121", "0x7f3a2b1c0740", "2.21.5"} & set(terms)


def test_the_nearest_cases_vote_by_similarity() -> None:
    query = case_terms(["NCCL WARN Error: failed to extend /dev/shm/nccl-xyz to 9637892 bytes, docker"])
    [first, *rest] = FOUR.votes(query, top=5, min_similarity=0.05)
    assert first.conclusion == "nccl-errors:shm-too-small" and len(first.cases) == 2
    assert first.score == pytest.approx(sum(s for s, _ in first.cases))
    assert all(v.score < first.score for v in rest)
    assert FOUR.votes(query, top=5, min_similarity=0.99) == []  # nothing that close
    assert FOUR.without("https://example.org/1").votes(query, 5, 0.05)[0].cases[0][1].source.endswith("/2")


def test_a_known_report_is_recognised_and_left_out_when_judging_it() -> None:
    case = next(c for c in shipped().cases if c.entry.startswith("nccl/"))
    log = corpus.CORPUS / f"{case.entry}.log"
    result = triage_sources(LIBRARY, None, [Source(str(log))])
    count = result.terms
    [(similarity, nearest)] = shipped().nearest(count, 1, 0.1)
    assert nearest == case and similarity > 0.99
    assert all(c.source != case.source for _, c in shipped().without(case.source).nearest(count, 5, 0.0))


UNKNOWN = """\
Traceback (most recent call last):
  File "train.py", line 88, in <module>
    trainer.fit()
frobnicate.FrobError: the frobnicator gave up after 3 tries
"""


def test_an_unknown_error_gets_the_votes_of_the_reports_like_it() -> None:
    text = UNKNOWN + "NCCL WARN shm_open /dev/shm docker shm-size\n"
    result = triage_text(LIBRARY, None, text, "paste", cases=FOUR)
    assert result.verdict == "similar"
    [case_match] = [m for m in result.matches if m.kind == "case"][:1]
    assert (case_match.runbook, case_match.conclusion, case_match.role) == (
        "nccl-errors", "shm-too-small", "similar")
    assert 0.1 <= case_match.confidence <= 0.3
    assert "https://example.org/" in case_match.why() and "公开报告" in case_match.why("zh")
    data = case_match.to_json()
    assert data["kind"] == "case" and data["cases"][0]["source"].startswith("https://example.org/")
    assert {m.kind for m in triage_text(LIBRARY, None, text, "paste", cases=KnownCases.empty()).matches} <= {
        "conclusion", "article"}


def test_a_named_cause_keeps_its_place_and_cases_only_fill_the_answer() -> None:
    text = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB; batch size\n"
    result = triage_text(LIBRARY, None, text, "paste", cases=FOUR)
    assert result.verdict == "cause" and result.matches[0].kind == "conclusion"
    added = [m for m in result.matches[1:] if m.role == "similar"]
    assert len(result.matches) <= 3 and all(m.kind == "case" for m in added)
    named = [(m.runbook, m.conclusion) for m in result.matches]
    assert len(named) == len(set(named))  # a case never repeats a conclusion already named


def test_no_error_line_no_case() -> None:
    result = triage_text(LIBRARY, None, "step 1 loss 2.0\nstep 2 loss 1.9\n", "paste", cases=FOUR)
    assert result.verdict == "no-error" and not [m for m in result.matches if m.kind == "case"]


def test_a_case_whose_conclusion_is_gone_is_skipped() -> None:
    gone = _cases(("https://example.org/9", "nccl-errors:renamed-away", "frobnicator gave up tries"))
    result = triage_text(LIBRARY, None, UNKNOWN, "paste", cases=gone)
    assert not [m for m in result.matches if m.kind == "case"]


def _text_match(conclusion: str, score: float) -> Match:
    runbook, _, conclusion_id = conclusion.partition(":")
    line = LineHit(4, "frobnicate.FrobError: gave up", Source("paste"))
    return Match(runbook, conclusion_id, conclusion_id, Text("t", "t"), [], "similar", 0.3, score,
                 similar_to=line)


def _vote(conclusion: str, score: float, nearest: float) -> Match:
    runbook, _, conclusion_id = conclusion.partition(":")
    cases = ((nearest, Case("https://example.org/v", (conclusion,), "v")),)
    return Match(runbook, conclusion_id, conclusion_id, Text("t", "t"), [], "similar", 0.2, score,
                 kind="case", cases=cases)


def test_a_conclusion_named_by_the_text_and_the_reports_comes_first_once() -> None:
    ranked = _fused([_text_match(OOM, 40.0), _text_match(SHM, 20.0)],
                    [_vote(SHM, 0.5, 0.5), _vote("ray-hang:object-store-full", 0.45, 0.45)])
    assert [f"{m.runbook}:{m.conclusion}" for m in ranked] == [SHM, "ray-hang:object-store-full", OOM]
    assert ranked[0].kind == "conclusion" and ranked[0].cases  # the text's match, with its reports
    assert "example.org/v" in ranked[0].why() and "公开报告" in ranked[0].why("zh")


def test_reports_barely_alike_do_not_outrank_a_strong_text_match() -> None:
    weak = _fused([_text_match(OOM, 40.0)], [_vote(SHM, 0.12, 0.12)])
    strong = _fused([_text_match(OOM, 40.0)], [_vote(SHM, 0.6, 0.6)])
    assert [m.conclusion for m in weak] == ["oom-batch-or-model", "shm-too-small"]
    assert [m.conclusion for m in strong] == ["shm-too-small", "oom-batch-or-model"]


def test_the_fused_answer_is_no_longer_than_the_two_lists_would_show() -> None:
    text = [_text_match(f"r:t{i}", 10.0 - i) for i in range(3)]
    votes = [_vote(f"r:v{i}", 0.5 - i / 10, 0.5) for i in range(5)]
    assert len(_fused(text, votes)) == 6
