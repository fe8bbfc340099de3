"""Which patterns may match a block (regexinfo.NeedleIndex: one pass of RE2's Set) says what
`may_match` says pattern by pattern, on the library's own patterns and real log lines."""

from __future__ import annotations

import random
from pathlib import Path

from runbook.library.runbooks import load_library
from runbook.triage.regexinfo import NeedleIndex, mask_digits, may_match
from runbook.triage.scan import Triage

CORPUS = Path(__file__).resolve().parents[1] / "data" / "triage-corpus"


def test_the_index_picks_exactly_the_patterns_may_match_picks() -> None:
    triage = Triage(load_library())
    needs = [pattern.needs for pattern in triage._ordered]
    index = NeedleIndex.build(needs)
    assert index is not None
    lines = [line for path in sorted(CORPUS.rglob("*.log"))
             for line in path.read_text("utf-8", errors="replace").splitlines()]
    rng = random.Random(39)
    blocks = ["", "nothing any pattern needs", "\n".join(lines[:5])]
    blocks += ["\n".join(rng.sample(lines, rng.randint(1, 40))) for _ in range(300)]
    chosen = 0
    for block in blocks:
        lowered = mask_digits(block).lower()
        expected = [i for i, n in enumerate(needs) if may_match(n, lowered)]
        assert index.candidates(lowered) == expected, block[:200]
        chosen += len(expected)
    assert chosen > 300  # the blocks hold what many patterns need


def test_patterns_that_need_nothing_are_always_candidates() -> None:
    index = NeedleIndex.build([[[]], [[frozenset({"nccl"})]], [[frozenset({"out of memory", "oom"})]]])
    assert index is not None
    assert index.candidates("") == [0]
    assert index.candidates("nccl warn") == [0, 1]
    assert index.candidates("cuda oom") == [0, 2]
