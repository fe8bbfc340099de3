"""readings/topology.py: a pasted `nvidia-smi topo -m` or P2P bandwidth test, read as an engineer
reads it (the page applies the same rules: tests/site/test_triage_page.py)."""

from __future__ import annotations

from runbook.library.runbooks import load_library
from runbook.triage.readings import topology
from runbook.triage.result import triage_text
from tests.triage.topology_examples import EXAMPLES


def kinds(text: str) -> list[str]:
    return [r["reading"] for r in topology.readings(text.splitlines())]


def test_a_pcie_only_topology_is_a_guess_and_nvlink_is_nothing() -> None:
    [pcie] = topology.readings(EXAMPLES["topo-pcie-only"].splitlines())
    assert pcie["guess"] and pcie["facts"] == {"gpus": 4, "links": "PIX, PXB, SYS"}
    assert kinds(EXAMPLES["topo-nvlink"]) == []


def test_p2p_slower_than_staged_copies_is_redirected() -> None:
    [slower] = topology.readings(EXAMPLES["p2p-slower"].splitlines())
    assert slower["facts"] == {"enabled": 1.91, "disabled": 13.15} and not slower.get("guess")
    said = topology.describe_reading(slower)
    assert "1.91 GB/s" in said and "13.15 GB/s" in said
    assert kinds(EXAMPLES["p2p-healthy"]) == []


def test_triage_names_the_redirect_when_nothing_else_is_found() -> None:
    result = triage_text(load_library(), None, EXAMPLES["p2p-slower"], "paste")
    first = result.matches[0]
    assert (first.runbook, first.conclusion, first.role) == ("nccl-errors", "p2p-redirected", "cause")
    assert result.verdict == "cause"


def test_a_copy_between_gpus_that_reads_zeros_is_redirected() -> None:
    """Zeros (or denormals) where the same number of values were seen, printed or in the code."""
    facts = {name: topology.readings(EXAMPLES[name].splitlines())[0]["facts"]
             for name in ("copy-zeros-literal", "copy-zeros-first-copy", "copy-zeros-elided")}
    assert facts["copy-zeros-literal"] == {"device": 1, "count": 2, "seen": "0.6, 0.6"}
    assert facts["copy-zeros-first-copy"] == {"device": 1, "count": 2, "seen": "1., 2."}
    assert facts["copy-zeros-elided"]["device"] == 1 and facts["copy-zeros-elided"]["count"] == 12
    denormal = (">>> x = torch.tensor([1.0, 2.0], device=0)\n>>> x.to(1)\n"
                "tensor([1.4013e-45, 0.0000e+00], device='cuda:1')")
    assert topology.readings(denormal.splitlines())[0]["facts"]["seen"] == "1.0, 2.0"
    assert "cuda:1 holds only zeros" in topology.describe_reading(topology.readings(denormal.splitlines())[0])


def test_zeros_that_are_not_a_lost_copy_are_nothing() -> None:
    assert kinds(EXAMPLES["copy-right"]) == []
    assert kinds(EXAMPLES["zeros-made"]) == []  # no copy between the GPUs
    one_gpu = ">>> a = torch.tensor([1., 2.])\n>>> a.to('cuda:0') * 0\ntensor([0., 0.], device='cuda:0')"
    assert kinds(one_gpu) == []  # one GPU: no copy between GPUs
    nan = ">>> a = torch.tensor([1., 2.], device='cuda:0')\n>>> a.to(1)\ntensor([nan, nan], device='cuda:1')"
    assert kinds(nan) == []  # NaN is a value, not a lost copy


def test_triage_names_a_lost_copy_first() -> None:
    result = triage_text(load_library(), None, EXAMPLES["copy-zeros-literal"], "paste")
    first = result.matches[0]
    assert (first.runbook, first.conclusion, first.role) == ("nccl-errors", "p2p-redirected", "cause")


def test_hostile_rows_cost_nothing() -> None:
    # a long row of digits and dots that is no matrix row: matched in linear time, no reading
    line = "     0 " + "1." * 5000 + "x"
    assert kinds("Unidirectional P2P=Enabled Bandwidth Matrix (GB/s)\n   D\\D  0\n" + line) == []
