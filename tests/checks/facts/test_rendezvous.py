"""rendezvous: rendezvous and TCPStore failures, on verbatim lines from public threads.

The lines and what they must give are in data/rendezvous.yaml.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from runbook.checks.facts import rendezvous

CASES = yaml.safe_load((Path(__file__).parent / "data" / "rendezvous.yaml").read_text(encoding="utf-8"))
FIELDS = {"count", "kind", "kinds", "joined", "expected", "missing", "timeout_s", "master_addr",
          "master_port", "port_in_use", "keys"}


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_verbatim_lines_give_exact_facts(case: dict[str, Any]) -> None:
    facts = rendezvous.parse(case["lines"].splitlines())
    assert facts is not None
    assert set(facts) == FIELDS
    assert {k: facts[k] for k in case["expected"]} == case["expected"]


def test_no_rendezvous_message_gives_none() -> None:
    assert rendezvous.parse([]) is None
    assert rendezvous.parse([
        "[E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(...)",
        "ubuntu:39964:40044 [0] proxy.cc:1143 NCCL WARN Socket recv failed while polling for opId=0x7f6f",
    ]) is None


@pytest.mark.parametrize("line", [
    # Constructed in torch's format: no thread we could find quotes errno 111 from c10d verbatim.
    "[W socket.cpp:601] [c10d] The client socket has failed to connect to [10.0.0.1]:29500 "
    "(errno: 111 - Connection refused).",
    # Constructed: the brief's `connect() failed ... Connection refused`.
    "RuntimeError: connect() failed: Connection refused",
])
def test_connection_refused(line: str) -> None:
    facts = rendezvous.parse([line])
    assert facts is not None
    assert facts["kind"] == "refused"


def test_wait_timeout_with_several_keys() -> None:
    # Constructed from the message torch >= 2.5 prints (keys joined by ", "); the key is the brief's.
    facts = rendezvous.parse(["torch.distributed.DistStoreError: wait timeout after 1800000ms, keys: "
                              "/default_pg/0//cuda//0, /default_pg/0//cuda//1"])
    assert facts is not None
    assert (facts["timeout_s"], facts["keys"]) == (1800, ["/default_pg/0//cuda//0", "/default_pg/0//cuda//1"])
