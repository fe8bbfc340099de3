"""checks/facts/state_dict.py: load_state_dict's missing and unexpected keys, and the wrapper
prefix between them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from runbook.checks.facts import extract, state_dict

CASES = yaml.safe_load((Path(__file__).parent / "data" / "state_dict.yaml").read_text(encoding="utf-8"))

# https://github.com/aks2203/deep-thinking/issues/5: saved under DataParallel, loaded unwrapped
DATAPARALLEL = [
    "RuntimeError: Error(s) in loading state_dict for DTNet:",
    '\tMissing key(s) in state_dict: "projection.0.weight", "recur_block.0.0.conv1.weight", '
    '"recur_block.0.0.conv2.weight", "head.0.weight", "head.2.weight", "head.4.weight". ',
    '\tUnexpected key(s) in state_dict: "module.projection.0.weight", "module.recur_block.0.0.conv1.weight", '
    '"module.recur_block.0.0.conv2.weight", "module.head.0.weight", "module.head.2.weight", '
    '"module.head.4.weight".',
]
# constructed in torch.compile's shape: the model compiled, the checkpoint saved from the plain one
COMPILED = [
    "[rank0]: RuntimeError: Error(s) in loading state_dict for OptimizedModule:",
    '[rank0]: \tMissing key(s) in state_dict: "_orig_mod.lstm.weight_ih_l0", "_orig_mod.lstm.weight_hh_l0". ',
    '[rank0]: \tUnexpected key(s) in state_dict: "lstm.weight_ih_l0", "lstm.weight_hh_l0". ',
]
# https://github.com/hou-yz/MVDet/issues/7: a module renamed between saving and loading, no prefix
RENAMED = [
    'Missing key(s) in state_dict: "map_classifier.0.weight", "map_classifier.0.bias", '
    '"map_classifier.2.weight". ',
    'Unexpected key(s) in state_dict: "world_classifier.0.weight", "world_classifier.0.bias", '
    '"world_classifier.2.weight".',
]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_verbatim_lines_give_exact_facts(case: dict[str, Any]) -> None:
    facts = state_dict.parse(case["lines"].splitlines())
    assert facts is not None
    assert {k: facts[k] for k in case["expected"]} == case["expected"]


def test_a_wrapper_prefix_on_the_checkpoint_explains_the_keys() -> None:
    facts = state_dict.parse(DATAPARALLEL)
    assert facts == {"missing_count": 6, "unexpected_count": 6, "prefix": "module.",
                     "prefix_on": "checkpoint", "explained_by_prefix": True}


def test_a_prefix_on_the_model_explains_them_too() -> None:
    facts = state_dict.parse(COMPILED)
    assert facts is not None
    said = (facts["prefix"], facts["prefix_on"], facts["explained_by_prefix"])
    assert said == ("_orig_mod.", "model", True)


def test_renamed_keys_are_not_a_prefix() -> None:
    facts = state_dict.parse(RENAMED)
    assert facts is not None and facts["explained_by_prefix"] is False and facts["prefix"] is None


def test_one_list_alone_or_mostly_other_keys_is_not_explained() -> None:
    only_missing = state_dict.parse(DATAPARALLEL[:2])
    assert only_missing is not None and only_missing["explained_by_prefix"] is False
    mostly_other = [DATAPARALLEL[1],
                    'Unexpected key(s) in state_dict: "module.head.0.weight", "a.b", "c.d", "e.f".']
    facts = state_dict.parse(mostly_other)
    assert facts is not None and facts["prefix"] == "module." and facts["explained_by_prefix"] is False
    assert state_dict.parse(["size mismatch for fc.weight"]) is None


def test_extract_names_the_family() -> None:
    assert extract(DATAPARALLEL)["state_dict"]["explained_by_prefix"] is True
