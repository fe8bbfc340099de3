""""Did you mean" from the index (format/suggest.py) is exactly difflib's choice, only sooner."""

from __future__ import annotations

import difflib
import random

from runbook.format.problems import did_you_mean
from runbook.format.suggest import Suggestions


def _names(rng: random.Random) -> list[str]:
    leaves = ["nccl-timeout", "cuda-oom", "disk-full", "gpu-xid", "ray-actor-died", "dataloader-hang"]
    names = [f"synth-{rng.choice(leaves)}-{i:04d}" for i in range(400)]
    names += [f"{n}-v2" for n in names[:50]] + ["a", "ab", "ba", "", "résumé-步骤", "aaaa", "start"]
    return names


def _mutated(rng: random.Random, word: str) -> str:
    for _ in range(rng.randint(0, 3)):
        i, roll = rng.randrange(len(word) + 1), rng.random()
        if roll < 0.5:
            word = word[:i] + rng.choice("abxz-019步") + word[i + 1:]
        elif roll < 0.8:
            word = word[:i] + word[i + 1:]
        else:
            word = word[:i] + "q" + word[i:]
    return word


def test_the_same_choice_as_difflib() -> None:
    rng = random.Random(28)
    names = _names(rng)
    words = [_mutated(rng, rng.choice(names)) for _ in range(80)]
    words += ["", "x", "synth", "something-else-entirely", "a" * 300, "ab", "ba", "synth-cuda-oom-0001"]
    index = Suggestions(names)
    for word in words:
        expected = difflib.get_close_matches(word, names, n=1, cutoff=0.6)
        assert index.closest(word) == (expected[0] if expected else None), word
        assert index.hint(word) == did_you_mean(word, names)


def test_a_tie_goes_to_the_greater_name_as_in_difflib() -> None:
    names = ["abcx", "abcy", "abcz"]  # each scores 0.75 against "abcd"
    assert difflib.get_close_matches("abcd", names, n=1) == ["abcz"]
    assert Suggestions(names).closest("abcd") == "abcz"
    assert Suggestions(list(reversed(names))).closest("abcd") == "abcz"


def test_nothing_close_and_no_names() -> None:
    assert Suggestions(["alpha", "beta"]).hint("zzzzzz") == ""
    assert Suggestions([]).closest("anything") is None
