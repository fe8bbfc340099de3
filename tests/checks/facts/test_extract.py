"""The registry and `extract`: every family at once, bounded input, plain JSON out, stdlib only."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

import runbook.checks.facts as facts_pkg
from runbook.checks.facts import FAMILIES, cuda_oom, extract, nccl, rendezvous, state_dict, watchdog, xid

DATA = Path(__file__).parent / "data"
MODULES = {"cuda_oom": cuda_oom, "nccl": nccl, "watchdog": watchdog, "rendezvous": rendezvous,
           "state_dict": state_dict, "xid": xid}


@functools.cache
def cases(family: str) -> list[dict[str, Any]]:
    return yaml.safe_load((DATA / f"{family}.yaml").read_text(encoding="utf-8"))


def mixed_log() -> list[str]:
    """The first case of every family, one after the other (a constructed mix of verbatim lines)."""
    return [line for family in FAMILIES for line in cases(family)[0]["lines"].splitlines()]


def test_the_registry_names_every_family() -> None:
    assert list(FAMILIES) == ["cuda_oom", "nccl", "watchdog", "rendezvous", "state_dict", "xid"]
    assert all(FAMILIES[name] is MODULES[name].parse for name in FAMILIES)


def test_every_case_cites_its_public_thread() -> None:
    for family in FAMILIES:
        family_cases = cases(family)
        ids = [c["id"] for c in family_cases]
        assert len(ids) == len(set(ids)), family
        assert all(c["url"].startswith("https://github.com/") and c["lines"].strip() for c in family_cases)
        assert len({c["url"] for c in family_cases}) >= 4, family


def test_empty_input_gives_no_family() -> None:
    assert extract([]) == {}
    assert extract("") == {}
    assert extract(["", "   "]) == {}


def test_lines_of_no_family_give_nothing() -> None:
    lines = ["Epoch 3: loss=0.21", "Traceback (most recent call last):", "ValueError: bad shape",
             "[rank0]: step 100 done", "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15"]
    assert extract(lines) == {}


def test_a_mixed_log_gives_every_family() -> None:
    found = extract(mixed_log())
    assert set(found) == set(FAMILIES)
    assert found == {name: FAMILIES[name](mixed_log()) for name in FAMILIES}


def test_a_string_is_read_as_its_lines() -> None:
    assert extract("\n".join(mixed_log())) == extract(mixed_log())


def test_facts_are_plain_json() -> None:
    found = extract(mixed_log())
    assert json.loads(json.dumps(found)) == found


def test_every_field_is_documented_in_its_module() -> None:
    for family, found in extract(mixed_log()).items():
        doc = MODULES[family].__doc__ or ""
        assert [field for field in found if field not in doc] == [], family


def test_a_megabyte_line_is_cut_before_matching() -> None:
    oom = cases("cuda_oom")[0]["lines"].splitlines()[-1]
    junk = "x" * 1_000_000
    assert extract([junk]) == {}
    assert extract([junk + oom]) == {}  # the message lies past the cut
    assert extract([oom + junk])["cuda_oom"]["requested_mib"] == 572.0


def test_long_lines_of_repeated_message_fragments_stay_bounded() -> None:
    # Constructed: the literal each family tests for, repeated, so that every regex runs on a cut line.
    fragments = ["Process 1 has ", "CUDA out of memory. Tried to allocate 1", "NCCL WARN ", "NCCL error ",
                 " NCCL [0] a:1:2 ", "NET/Socket : Using [0]a:", "[PG 1 Rank ", "Watchdog caught collective "
                 "operation timeout: WorkNCCL(", "NVRM: Xid (PCI:0000:", "Timed out after 1 seconds waiting "
                 "for clients. ", "The client socket has timed out after 1s while trying to connect to ",
                 "wait timeout after 1ms, keys: a, "]
    lines = [fragment * 100_000 for fragment in fragments]
    found = extract(lines)
    assert json.loads(json.dumps(found)) == found


def test_the_package_imports_the_standard_library_only() -> None:
    root = Path(facts_pkg.__file__).parents[3]  # the folder that holds runbook/
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import runbook.checks.facts as f; "
            "print(','.join(sorted(m.split('.')[0] for m in sys.modules)))")
    done = subprocess.run([sys.executable, "-S", "-c", code, str(root)], capture_output=True, text=True,
                          timeout=60, check=True)
    imported = set(done.stdout.strip().split(",")) - {"runbook"}
    assert imported <= set(sys.stdlib_module_names) | {"__main__"}
