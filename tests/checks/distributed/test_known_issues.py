"""The `known_issues` check and its table of releases with known bugs (`known_regressions.json`)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from runbook.checks.base import CheckContext
from runbook.checks.distributed import _regressions, known_issues

# Verbatim from https://github.com/mit-han-lab/distrifuser/issues/6 (torch's heartbeat monitor
# fires while ProcessGroupNCCL waits 600 s for the abort).
ABORT_THEN_HEARTBEAT = [
    "[rank0]:[E ProcessGroupNCCL.cpp:1025] [PG 0 Rank 0] Future for ProcessGroup abort timed out after "
    "600000 ms",
    "[rank1]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 1] Heartbeat monitor timed out! Process will be "
    "terminated after dumping debug info. workMetaList_.size()=0",
]
# A heartbeat alone (https://github.com/hiyouga/LlamaFactory/issues/6953): a real hang, no abort wait.
HEARTBEAT_ONLY = [
    "[rank144]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 144] Heartbeat monitor timed out! Process will be "
    "terminated after dumping debug info. workMetaList_.size()=1",
]


def test_the_shipped_table_loads_and_every_row_cites_a_thread() -> None:
    rows = _regressions.load()
    ids = {row["id"] for row in rows}
    assert ids >= {"torch-heartbeat-kills-during-abort", "nccl-2.25.1-comm-abort-hang"}
    for row in rows:
        assert all(url.startswith("https://github.com/") for url in row["sources"])


def _table(*rows: dict) -> str:
    return json.dumps(list(rows), indent=2)


GOOD = {"id": "x", "component": "nccl", "kind": "abort-hang", "title": {"en": "t", "zh": "t"},
        "affected": ["==2.25.1"], "fixed_in": "2.26.2", "fix": {"en": "f", "zh": "f"},
        "workaround": {"en": "w", "zh": "w"}, "sources": ["https://github.com/o/r/issues/1"]}


@pytest.mark.parametrize(("row", "says"), [
    ({**GOOD, "affected": ["2.25.1"]}, "affected must list specifiers"),
    ({**GOOD, "fixed_in": "soon"}, "fixed_in must be a release"),
    ({k: v for k, v in GOOD.items() if k != "fix"}, "missing ['fix']"),
    ({**GOOD, "colour": "red"}, "unknown ['colour']"),
    ({**GOOD, "title": {"en": "t"}}, "title needs non-empty en and zh"),
    ({**GOOD, "sources": []}, "sources must list"),
    ({k: v for k, v in GOOD.items() if k != "affected"}, "needs affected versions or log_all"),
    ({**GOOD, "log_all": ["(unclosed"]}, "log_all pattern"),
    ({**GOOD, "component": "cuda"}, "component must be one of"),
    ({**GOOD, "env": {"lower": "1"}}, "env must map NAME"),
])
def test_a_bad_row_is_one_line_naming_the_file_and_line(row: dict, says: str) -> None:
    text = _table(GOOD | {"id": "first"}, row)
    with pytest.raises(_regressions.TableError) as caught:
        _regressions.load(text, "t.json")
    message = str(caught.value)
    assert "\n" not in message and says in message
    # the second row's opening brace is on the line after the first row's closing one
    assert message.startswith(f"t.json:{text.splitlines().index('  },') + 2}: ")


@pytest.mark.parametrize(("text", "says"), [
    ("{}", "t.json:1: the table must be a JSON array"),
    ('[\n {"id": 1,}\n]', "t.json:2: not valid JSON"),
    ("[\n" + json.dumps(GOOD) + "\n" + json.dumps(GOOD) + "]", "t.json:3: expected ',' or ']'"),
    ("[]\n[]", "t.json:2: text after"),
])
def test_a_malformed_file_is_one_line(text: str, says: str) -> None:
    with pytest.raises(_regressions.TableError, match=rf"^{says}"):
        _regressions.load(text, "t.json")


def test_duplicate_ids_are_refused() -> None:
    with pytest.raises(_regressions.TableError, match="duplicate row ids: \\['x'\\]"):
        _regressions.load(_table(GOOD, GOOD), "t.json")


@pytest.mark.parametrize(("version", "specs", "holds"), [
    ("2.25.1", ["==2.25.1"], True),
    ("2.26.2", ["==2.25.1"], False),
    ("2.3.0+cu121", [">=2.3.0", "<2.5.0"], True),
    ("2.3.0a0+git8837df1", [">=2.3.0", "<2.5.0"], True),
    ("2.5.1", [">=2.3.0", "<2.5.0"], False),
    ("2.3", ["==2.3.0"], True),
    ("unknown", [">=0"], False),
])
def test_versions_meet_specifiers(version: str, specs: list[str], holds: bool) -> None:
    assert _regressions.satisfies(version, specs) is holds


def test_an_affected_nccl_matches_and_a_fixed_one_does_not() -> None:
    rows = _regressions.load()
    hit = _regressions.match(rows, {"torch": [], "nccl": ["2.26.2", "2.25.1"]}, [])
    assert [(m["id"], m["version"], m["fixed_in"]) for m in hit] == [
        ("nccl-2.25.1-comm-abort-hang", "2.25.1", "2.26.2")]
    assert _regressions.match(rows, {"torch": ["2.7.0"], "nccl": ["2.26.2"]}, []) == []


def test_the_watchdog_row_needs_the_abort_wait_and_the_heartbeat_in_the_log() -> None:
    rows = _regressions.load()
    versions = {"torch": ["2.3.0+cu121"], "nccl": []}
    hit = _regressions.match(rows, versions, ["noise", *ABORT_THEN_HEARTBEAT])
    assert [m["id"] for m in hit] == ["torch-heartbeat-kills-during-abort"]
    assert hit[0]["version"] == "2.3.0+cu121"
    assert hit[0]["log_lines"] == ABORT_THEN_HEARTBEAT
    assert hit[0]["env"] == {"TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": "1200"}
    assert _regressions.match(rows, versions, HEARTBEAT_ONLY) == []


def test_the_check_matches_a_log_and_the_version_it_printed(
        tmp_path: Path, make_ctx: Callable[..., CheckContext]) -> None:
    log = tmp_path / "train.log"
    log.write_text("NCCL version 2.25.1+cuda12.4\n" + "\n".join(ABORT_THEN_HEARTBEAT) + "\n")
    # `match` names no process: the test must not pick up another torch process on this machine
    result = known_issues.run({"log": str(log), "match": "no-such-job-[x]yz", "nccl_version": "2.25.1",
                               "torch": "2.3.0+cu121", "import_torch": False}, make_ctx(20))
    assert result["available"] is True, result["reason"]
    assert result["log"] == str(log)
    assert result["torch_version"] == "2.3.0+cu121" and result["nccl_versions"] == ["2.25.1"]
    assert result["version_sources"] == {"torch": "param", "nccl": ["log"]}
    assert result["matched_ids"] == ["torch-heartbeat-kills-during-abort", "nccl-2.25.1-comm-abort-hang"]
    assert result["matched_kinds"] == ["watchdog", "abort-hang"]
    assert result["watchdog"]["sources"][0] == "https://github.com/pytorch/pytorch/pull/128751"
    assert result["abort_hang"]["fixed_in"] == "2.26.2"


def test_unaffected_versions_and_a_plain_heartbeat_match_nothing(
        tmp_path: Path, make_ctx: Callable[..., CheckContext]) -> None:
    log = tmp_path / "train.log"
    log.write_text("\n".join(HEARTBEAT_ONLY) + "\n")
    result = known_issues.run({"log": str(log), "match": "no-such-job-[x]yz", "nccl_version": "2.21.5",
                               "torch": "2.5.1", "import_torch": False}, make_ctx(20))
    assert result["available"] is True
    assert result["matches"] == [] and result["matched_kinds"] == []
    assert result["watchdog"] is None and result["abort_hang"] is None


def test_nothing_to_match_is_a_reason(make_ctx: Callable[..., CheckContext]) -> None:
    result = known_issues.run({"import_torch": False}, make_ctx(5))
    assert result["available"] is False
    assert result["reason"] == "no torch or NCCL version and no log to match"
    assert result["table_rows"] == len(_regressions.load())


def test_torch_version_is_read_beside_the_mapped_libtorch(tmp_path: Path) -> None:
    torch_dir = tmp_path / "site-packages" / "torch"
    torch_dir.mkdir(parents=True)
    (torch_dir / "version.py").write_text("from typing import Optional\n__version__ = '2.3.0+cu121'\n")
    assert known_issues.read_torch_version(str(torch_dir)) == "2.3.0+cu121"
    assert known_issues.read_torch_version(str(tmp_path)) is None
    assert known_issues._TORCH_LIB.match(f"{torch_dir}/lib/libtorch_cuda.so").group(1) == str(torch_dir)


def test_the_table_ships_in_the_probe_bundle(tmp_path: Path) -> None:
    """Nodes run the probe as a zipapp: the check reads the table from inside it."""
    from runbook.transports.bundle import bundle_bytes

    bundle = tmp_path / "probe.pyz"
    bundle.write_bytes(bundle_bytes())
    request = {"check": "known_issues", "with": {"nccl_version": "2.25.1", "import_torch": False},
               "timeout": 20}
    done = subprocess.run([sys.executable, str(bundle)], input=json.dumps(request), capture_output=True,
                          text=True, cwd=tmp_path, timeout=60)
    result = json.loads(done.stdout)["result"]
    assert result["table_rows"] == len(_regressions.load())
    assert result["matched_ids"] == ["nccl-2.25.1-comm-abort-hang"]


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed here")
def test_a_live_process_gives_its_torch_version_from_the_libtorch_it_maps(
        make_ctx: Callable[..., CheckContext]) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time, torch; print(torch.__version__, flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True)
    try:
        imported = proc.stdout.readline().strip() if proc.stdout else ""  # torch is mapped once it prints
        result = known_issues.run({"pid": proc.pid, "import_torch": False}, make_ctx(20))
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert imported and result["pid"] == proc.pid
    assert result["torch_version"] == imported
    assert result["version_sources"]["torch"] == "maps"
    assert result["available"] is True and result["matches"] == []  # no row names this release


# NCCL releases whose bug fails with an error (kind `error`): each row needs the bug's own log line as well
# as an affected release. The lines are from the threads the rows cite.
NET_ID_0 = [
    "graph/search.cc:1135 NCCL WARN Could not find a path for pattern 1, falling back to simple order",
    "graph/topo.h:230 NCCL WARN Could not find NET with id 0",
    "torch.distributed.DistBackendError: NCCL error in: /opt/pytorch/pytorch/torch/csrc/distributed/c10d/"
    "ProcessGroupNCCL.cpp:3376, internal error - please report this issue to the NCCL developers, NCCL "
    "version 2.25.1",
]
P2P_SETUP = ["(RayWorkerVllm pid=4028887) ERROR 03-28 21:38:23 ray_utils.py:44] Cuda failure "
             "'invalid argument'"]
UDS_BIND = ["h:33:10589 [2] misc/ipcsocket.cc:57 NCCL WARN UDS: Binding to socket "
            "/tmp/nccl-socket-2-e647f8d8e15809a1 failed : Address already in use (98)"]


def _error_ids(nccl: str, lines: list[str]) -> list[str]:
    hit = _regressions.match(_regressions.load(), {"torch": [], "nccl": [nccl]}, lines)
    return [m["id"] for m in hit if m["kind"] == "error"]


@pytest.mark.parametrize(("nccl", "lines", "ids"), [
    ("2.25.1", NET_ID_0, ["nccl-2.24-2.26-nic-fusion-net-id-0"]),
    ("2.26.2", NET_ID_0, ["nccl-2.24-2.26-nic-fusion-net-id-0"]),
    ("2.27.3", NET_ID_0, []),  # the release that fixes it
    ("2.23.4", NET_ID_0, []),  # before NIC fusion
    ("2.18.1", P2P_SETUP, ["nccl-2.18-p2p-setup-invalid-argument"]),
    ("2.19.1", P2P_SETUP, ["nccl-2.18-p2p-setup-invalid-argument"]),
    ("2.18.6", P2P_SETUP, []),
    ("2.19.3", P2P_SETUP, []),
    # the fabric manager's NVLS failure in the same words is not the P2P bug
    ("2.18.5", ["n7:4411:4470 [3] transport/nvls.cc:165 NCCL WARN Cuda failure 'invalid argument'"], []),
    ("2.20.3", UDS_BIND, ["nccl-2.20.3-uds-bind-comm-split"]),
    ("2.20.5", UDS_BIND, []),
    ("2.25.1", ["t:259034:259124 [0] NCCL INFO ncclMaxSharedMem 82240 exceeds device/fn maxSharedMem 79856"],
     ["nccl-2.25.1-blackwell-shared-memory"]),
    # an affected release with no line of its bug: the version alone never matches an error row
    ("2.25.1", ["NCCL version 2.25.1+cuda12.8"], []),
    ("2.18.1", ["NCCL version 2.18.1+cuda12.1"], []),
])
def test_an_error_row_needs_an_affected_release_and_the_bugs_line(nccl: str, lines: list[str],
                                                                   ids: list[str]) -> None:
    assert _error_ids(nccl, ["noise", *lines]) == ids


def test_every_error_row_names_its_lines_its_fix_and_a_pip_requirement() -> None:
    rows = [row for row in _regressions.load() if row["kind"] == "error"]
    assert len(rows) >= 4
    for row in rows:
        assert row["component"] == "nccl" and row["affected"] and row["log_all"] and row["fixed_in"]
        assert row["upgrade"].startswith("nvidia-nccl-cu12>=")


def test_the_check_matches_an_error_row_from_the_log_and_the_version_it_printed(
        tmp_path: Path, make_ctx: Callable[..., CheckContext]) -> None:
    log = tmp_path / "train.log"
    log.write_text("\n".join(NET_ID_0) + "\n")
    result = known_issues.run({"log": str(log), "match": "no-such-job-[x]yz", "nccl_version": "2.25.1",
                               "import_torch": False}, make_ctx(20))
    assert result["available"] is True, result["reason"]
    assert result["matched_ids"] == ["nccl-2.25.1-comm-abort-hang", "nccl-2.24-2.26-nic-fusion-net-id-0"]
    assert result["matched_kinds"] == ["abort-hang", "error"]
    error = next(m for m in result["matches"] if m["kind"] == "error")
    assert error["version"] == "2.25.1" and error["fixed_in"] == "2.27.3"
    assert error["log_lines"] == ["graph/topo.h:230 NCCL WARN Could not find NET with id 0"]
    assert result["watchdog"] is None and result["abort_hang"]["id"] == "nccl-2.25.1-comm-abort-hang"
