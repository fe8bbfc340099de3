"""`flight-recorder` job analysis: the ranks' dumps of real 4-rank gloo jobs, compared across nodes."""

from __future__ import annotations

import copy
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ENGINE = Path(__file__).resolve().parents[2] / "engine"
if str(ENGINE) not in sys.path:
    sys.path.insert(0, str(ENGINE))

from runbook.checks.base import CheckContext  # noqa: E402
from runbook.checks.distributed import flight_recorder as check  # noqa: E402
from runbook.jobs import flight_recorder  # noqa: E402
from runbook.jobs.flight_recorder import compare  # noqa: E402

FR = Path(__file__).resolve().parents[1] / "data" / "flight-recorder"
# Where each rank ran: two on node-a, rank 2 on node-c, rank 3 on node-b.
NODES = {"node-a": (0, 1), "node-b": (3,), "node-c": (2,)}


def results(scenario: str, ext: str = "json") -> dict[str, dict[str, Any]]:
    """Each node's `flight_recorder` check result over its ranks' real dumps."""
    out = {}
    for node, ranks in NODES.items():
        paths = [str(FR / f"gloo-{scenario}" / f"rank{r}.{ext}") for r in ranks]
        out[node] = check.run({"paths": paths}, CheckContext(deadline=time.monotonic() + 10))
    return out


@pytest.mark.parametrize("ext", ["json", "pickle"])
def test_in_sync(ext: str) -> None:
    out = compare(results("in-sync", ext))
    assert (out["verdict"], out["problem"], out["taxonomy"]) == ("in-sync", False, [])
    assert out["pg"] == {"name": "0", "desc": "default_pg"}
    assert out["last_completed"] == {0: 5, 1: 5, 2: 5, 3: 5}
    assert out["first_mismatch"] is None and out["suspects"] == [] and out["missing"] == []
    assert out["finding"]["en"] == "all 4 ranks of default_pg issued the same collectives up to #5, " \
                                   "completed up to #5"
    json.dumps(out)


@pytest.mark.parametrize("ext", ["json", "pickle"])
def test_mismatch(ext: str) -> None:
    out = compare(results("mismatch", ext))
    assert (out["verdict"], out["taxonomy"], out["tie"]) == ("mismatch", ["hang.collective"], False)
    assert out["first_mismatch"]["seq"] == 4
    assert out["first_mismatch"]["ops"][3] == {"op": "broadcast", "sizes": [[8]], "dtypes": ["Float"]}
    assert {out["first_mismatch"]["ops"][r]["op"] for r in (0, 1, 2)} == {"all_gather"}
    assert out["suspects"] == [{"rank": 3, "node": "node-b", "seq": 4, "op": "broadcast"}]
    assert out["finding"]["en"] == ("rank 3 (node-b) issued broadcast as collective #4 of default_pg "
                                    "where ranks 0-2 issued all_gather")
    assert "rank 3（node-b）" in out["finding"]["zh"] and "rank 0-2" in out["finding"]["zh"]
    assert out["hosts"] == ["node-b"] and out["ranks"] == [3]
    assert out["nodes"]["node-b"]["suspect"] is True and out["nodes"]["node-a"]["suspect"] is False


@pytest.mark.parametrize("ext", ["json", "pickle"])
def test_behind(ext: str) -> None:
    out = compare(results("behind", ext))
    assert (out["verdict"], out["taxonomy"]) == ("behind", ["perf.straggler"])
    assert out["behind"] == [2]
    assert out["suspects"] == [{"rank": 2, "node": "node-c", "seq": 5, "op": "all_reduce"}]
    assert out["last_completed"][2] == 5 and out["last_issued"] == {0: 6, 1: 6, 2: 5, 3: 6}
    assert out["finding"]["en"] == ("rank 2 (node-c) is one collective behind: last completed #5, "
                                    "ranks 0, 1, 3 reached #6 of default_pg")
    assert "rank 2（node-c）落后 1 个集合通信" in out["finding"]["zh"]


def test_missing() -> None:
    found = results("missing")
    assert found["node-c"]["found"] is False  # rank 2 died before it could dump
    out = compare(found)
    assert (out["verdict"], out["taxonomy"]) == ("missing-ranks", ["launch.rendezvous"])
    assert out["missing"] == [2] and out["expected"] == [0, 1, 2, 3] and out["ranks"] == [2]
    assert out["finding"]["en"] == ("rank 2 of 4 missing: no flight-recorder dump from it (default_pg); "
                                    "dumps from ranks 0, 1, 3; node-c has no dump")
    assert out["nodes"]["node-c"] == {"suspect": True, "ranks": [], "no_dump": True}
    assert out["hosts"] == ["node-c"]


def test_a_tie_is_said_as_a_tie() -> None:
    found = results("mismatch")
    node_c = copy.deepcopy(found["node-c"])  # rank 2 now issues broadcast too: 2 against 2
    node_c["dumps"][0]["entries"][3].update(op="broadcast", output_sizes=[[8]])
    out = compare({**found, "node-c": node_c})
    assert out["verdict"] == "mismatch" and out["tie"] is True
    assert [s["rank"] for s in out["suspects"]] == [2, 3]
    assert out["finding"]["en"] == ("a tie (2 vs 2), no majority to trust: ranks 2, 3 (node-b, node-c) "
                                    "issued broadcast as collective #4 of default_pg where ranks 0, 1 "
                                    "issued all_gather")
    assert out["finding"]["zh"].startswith("两边人数相同（2 对 2）")


def test_sizes_differ_with_the_same_op() -> None:
    found = results("in-sync")
    node_b = copy.deepcopy(found["node-b"])
    node_b["dumps"][0]["entries"][2]["input_sizes"] = [[16]]
    out = compare({**found, "node-b": node_b})
    assert out["verdict"] == "mismatch" and out["first_mismatch"]["seq"] == 3
    assert out["finding"]["en"] == ("rank 3 (node-b) issued all_reduce (sizes [[16]], dtypes ['Float']) as "
                                    "collective #3 of default_pg where ranks 0-2 issued all_reduce "
                                    "(sizes [[8]], dtypes ['Float'])")


def test_partial_dumps_compare_what_they_share() -> None:
    found = results("mismatch")
    for node in found.values():  # every rank kept only its last two entries; rank 0 only its last one
        for dump in node["dumps"]:
            dump["entries"] = dump["entries"][-1:] if dump["rank"] == 0 else dump["entries"][-2:]
    out = compare(found)
    assert out["verdict"] == "mismatch" and out["first_mismatch"]["seq"] == 4
    assert [s["rank"] for s in out["suspects"]] == [3]


def test_groups_without_a_known_size_count_the_gaps() -> None:
    found = results("missing")
    for node in found.values():
        for dump in node["dumps"]:
            for pg in dump["pg"]:
                pg["ranks"] = None
    out = compare(found)
    assert out["verdict"] == "missing-ranks" and out["missing"] == [2] and out["expected"] is None
    assert out["finding"]["en"].startswith("rank 2 missing: no flight-recorder dump from it")


def test_a_node_that_did_not_answer() -> None:
    found = results("in-sync")
    out = compare({**found, "node-c": None})
    assert out["verdict"] == "missing-ranks" and out["missing"] == [2]
    assert out["finding"]["en"].endswith("; node-c did not answer")
    assert out["nodes"]["node-c"]["suspect"] is True


@pytest.mark.parametrize("found", [
    {},
    {"node-a": None},
    {"node-a": {"found": False, "dumps": [], "errors": [{"path": "/tmp/x", "reason": "refused: ..."}]},
     "node-b": {"found": False, "dumps": [], "errors": []}},
    {"node-a": {"found": True, "dumps": [{"path": "/tmp/fr_trace", "rank": None, "pg": [], "entries": []}]}},
])
def test_no_data(found: dict[str, Any]) -> None:
    out = compare(found)
    assert (out["verdict"], out["problem"], out["taxonomy"], out["suspects"]) == ("no-data", False, [], [])
    assert out["finding"]["en"].startswith("no flight-recorder dump with a rank on any node")
    if "node-a" in found and found["node-a"] and found["node-a"].get("errors"):
        assert "(1 unreadable file)" in out["finding"]["en"]


def test_the_h100_nccl_rank_alone_is_in_sync() -> None:
    node = check.run({"paths": str(FR / "nccl-1rank-h100" / "fr_trace*")},
                     CheckContext(deadline=time.monotonic() + 10))
    out = compare({"gpu-node": node})
    assert out["verdict"] == "in-sync" and out["last_completed"] == {0: 4}


def test_one_rank_asked_alone_says_which_collective_it_is_in() -> None:
    [(node, result)] = [(n, r) for n, r in results("behind").items() if _has_rank(r, 2)]
    out = compare({node: result})
    assert out["verdict"] == "one-rank" and out["rank"] == 2 and out["problem"] is False
    assert out["seq"] == out["last_issued"][2] and out["op"]
    head = f"rank 2 ({node}) last issued collective #{out['seq']} `{out['op']}`"
    assert out["finding"]["en"].startswith(head)


def _has_rank(result: dict, rank: int) -> bool:
    return any(dump.get("rank") == rank for dump in (result or {}).get("dumps") or [])


def test_the_registered_analysis() -> None:
    from runbook.jobs import run_analysis

    out = run_analysis("flight-recorder", results("mismatch"), {})
    assert out["analysis"] == "flight-recorder" and out["verdict"] == "mismatch" and out["problem"] is True
    assert flight_recorder.analyse(results("behind"), {"pg": "default_pg"})["verdict"] == "behind"
