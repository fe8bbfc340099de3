"""nccl: NCCL's WARN/INFO lines and PyTorch's NCCL errors, on verbatim lines (data/nccl.yaml)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from runbook.checks.facts import nccl

CASES = yaml.safe_load((Path(__file__).parent / "data" / "nccl.yaml").read_text(encoding="utf-8"))
FIELDS = {
    "version", "cuda_version", "error_class", "result", "error_count", "last_error", "warn_count",
    "causes", "cause_kinds", "duplicate_gpu", "env", "socket_ifname", "socket_interfaces",
    "bootstrap_interfaces", "ib_devices", "network", "ib_no_device", "no_socket_interface", "hosts",
    "pids",
}


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_verbatim_lines_give_exact_facts(case: dict[str, Any]) -> None:
    facts = nccl.parse(case["lines"].splitlines())
    assert facts is not None
    assert set(facts) == FIELDS
    assert {k: facts[k] for k in case["expected"]} == case["expected"]


def test_lines_without_nccl_facts_give_none() -> None:
    assert nccl.parse([]) is None
    # A traceback line that names the backend says nothing of NCCL's state.
    assert nccl.parse(['    dist.init_process_group(backend="nccl")', "Last error:", ""]) is None


@pytest.mark.parametrize(("message", "cause"), [
    ("Error while creating shared memory segment /dev/shm/nccl-KWfVyt (size 5967872)", "shm"),
    ("NET/IB : Got completion from peer 10.0.0.1<1234> with error 12, opcode 0, len 0, vendor err 129", "ib"),
    ("Cuda failure 'out of memory'", "cuda"),
    ("socketStartConnect: Connect to 10.1.1.2<43215> failed : Software caused connection abort",
     "connection"),
    ("Call to connect returned Connection refused, retrying", "connection"),
    ("unable to allocate shared memory", "shm"),
    ("Failed to allocate memory: Cannot allocate memory", "resource-limit"),
    ("Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 60", "config"),
    ("[Proxy Service 0] Failed to execute operation Connect from rank 0, retcode 2", "other"),
])
def test_cause_vocabulary(message: str, cause: str) -> None:
    # The brief's example messages, classified one by one (not all from a thread: see the data file).
    assert nccl.classify(message) == cause


def test_lists_are_capped() -> None:
    # Constructed: 50 distinct WARN messages from 50 hosts.
    lines = [f"host{i}:{1000 + i}:{2000 + i} [0] misc/socket.cc:1 NCCL WARN socketProgress: peer {i}"
             for i in range(50)]
    facts = nccl.parse(lines)
    assert facts is not None
    sizes = (facts["warn_count"], len(facts["causes"]), len(facts["hosts"]), len(facts["pids"]))
    assert sizes == (50, 20, 20, 20)
