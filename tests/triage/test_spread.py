"""What differs across hosts and ranks in one paste or directory (triage/readings/spread.py), through the
real `runbook triage` on files: the hosts come from NCCL's line prefix, a launcher's rank prefix, or
the file's place in a directory of per-host logs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from runbook.library.runbooks import load_library
from runbook.triage.result import triage_sources
from runbook.triage.sources import Source, expand_inputs

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "triage-corpus"
LIBRARY = load_library()


def differences(*paths: Path) -> list[dict]:
    return triage_sources(LIBRARY, None, [Source(str(p)) for p in paths]).differences


def test_a_net_plugin_on_part_of_the_hosts_is_named_with_its_hosts() -> None:
    # NVIDIA/nccl#1634, verbatim: one host has HPC-X's plugin, the other NCCL's internal network
    done = subprocess.run([sys.executable, "-m", "runbook", "triage", "--format", "json",
                           str(CORPUS / "nccl" / "1634-net-plugin-on-part-of-hosts.log")],
                          capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "RUNBOOK_LANG": "en"})
    doc = json.loads(done.stdout)
    # no line names a failure: the difference is the most specific conclusion the paste supports
    assert doc["verdict"] == "cause" and done.returncode == 0
    first = doc["matches"][0]
    assert (first["runbook"], first["conclusion"]["id"], first["role"]) == (
        "nccl-errors", "nccl-settings-differ", "cause")
    assert first["confidence"] < 0.5  # a guess: a setting that differs can be harmless
    assert doc["differences"] == [{
        "fact": "NCCL net plugin", "conclusion": "nccl-errors:nccl-settings-differ", "values": [
            {"value": "none (NCCL's internal network)", "who": ["HGX-H100-11"], "more": 0,
             "first": f"{CORPUS / 'nccl' / '1634-net-plugin-on-part-of-hosts.log'}:1",
             "line": "NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin."},
            {"value": "/opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so", "who": ["HGX-H100-04"],
             "more": 0, "first": f"{CORPUS / 'nccl' / '1634-net-plugin-on-part-of-hosts.log'}:2",
             "line": "NCCL INFO Plugin Path : /opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so"}]}]
    assert doc["summary"] == ("This node's NCCL_* settings differ from its peers': differs across "
                              "hosts/ranks: NCCL net plugin: none (NCCL's internal network) on HGX-H100-11; "
                              "/opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so on HGX-H100-04")
    assert doc["advice"] is None  # a conclusion: its runbook is what to run next


def test_versions_and_settings_by_rank_prefix_and_agreeing_hosts_say_nothing(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text(
        "[1,0]<stdout>:NCCL version 2.4.2+cuda10.0\n"
        "[1,4]<stdout>:NCCL version 2.5.6+cuda10.1\n"
        "gpu6:1407:1595 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0\n"
        "gpu7:4105:4372 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0\n"
        "gpu6:1407:1595 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1\n"
        "gpu7:4105:4372 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 0\n"
        "NCCL version 2.7.8+cuda11.0\n")  # no prefix: nobody to compare it with
    found = {d["fact"]: d for d in differences(log)}
    assert set(found) == {"NCCL", "CUDA of NCCL's build", "NCCL_IB_DISABLE"}  # IFNAME agrees
    assert [(v["value"], v["who"]) for v in found["NCCL"]["values"]] == [("2.4.2", ["rank 0"]),
                                                                        ("2.5.6", ["rank 4"])]
    assert found["NCCL"]["conclusion"] == "nccl-errors:nccl-version-differs-from-peers"
    assert [(v["value"], v["who"]) for v in found["NCCL_IB_DISABLE"]["values"]] == [("1", ["gpu6"]),
                                                                                   ("0", ["gpu7"])]
    assert found["NCCL_IB_DISABLE"]["conclusion"] == "nccl-errors:nccl-settings-differ"


def test_a_directory_of_per_host_logs_names_the_hosts_by_their_files(tmp_path: Path) -> None:
    for host, torch in (("node-a", "2.4.0"), ("node-b", "2.4.0"), ("node-c", "2.3.1")):
        (tmp_path / host).mkdir()
        (tmp_path / host / "rank0.log").write_text(f"PyTorch version: {torch}+cu121\nstep 1 | loss 2.3\n")
    found = triage_sources(LIBRARY, None, expand_inputs([str(tmp_path)])).differences
    assert [(d["fact"], [(v["value"], v["who"]) for v in d["values"]]) for d in found] == [
        ("torch", [("2.4.0+cu121", ["node-a", "node-b"]), ("2.3.1+cu121", ["node-c"])])]


def test_many_hosts_with_one_value_are_counted_not_listed(tmp_path: Path) -> None:
    lines = [f"gpu{n:02d}:1:1 [0] NCCL INFO NCCL_ALGO set by environment to Ring" for n in range(20)]
    lines.append("gpu99:1:1 [0] NCCL INFO NCCL_ALGO set by environment to Tree")
    log = tmp_path / "all.log"
    log.write_text("\n".join(lines) + "\n")
    ring, tree = differences(log)[0]["values"]
    assert ring["who"] == [f"gpu{n:02d}" for n in range(8)] and ring["more"] == 12
    assert tree["who"] == ["gpu99"] and tree["more"] == 0


def test_real_banners_that_agree_show_no_difference() -> None:
    # NVIDIA/nccl#634: three nodes' banners, all alike; and every other corpus log says nothing
    assert differences(CORPUS / "nccl" / "634-three-nodes-init-hang-ib-disabled-banners.log") == []
