"""The `flight_recorder` check on real dumps: 4-rank gloo jobs on CPU (scripts/fr_gloo_dumps.py) and
one NCCL rank on an H100 (scripts/gpu/fr_dump.py); broken files, a malicious pickle, the live server."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from runbook.checks.base import CheckContext
from runbook.checks.distributed import _fr_pickle, flight_recorder

REPO = Path(__file__).resolve().parents[3]
FR = REPO / "tests" / "data" / "flight-recorder"
Ctx = Callable[..., CheckContext]


def _copy(scenario: str, dest: Path, suffixes: tuple[str, ...] = (".json", ".pickle")) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for path in sorted((FR / f"gloo-{scenario}").glob("rank*")):
        if path.suffix in suffixes:
            shutil.copy(path, dest / path.name)
    return dest


def _ops(dump: dict[str, Any]) -> list[tuple[int, str, str]]:
    return [(e["collective_seq_id"], e["op"], e["backend"]) for e in dump["entries"]]


def test_gloo_dumps_json_variant_first(tmp_path: Path, make_ctx: Ctx) -> None:
    folder = _copy("mismatch", tmp_path / "dumps")
    result = flight_recorder.run({"paths": str(folder / "*")}, make_ctx())
    assert result["found"] is True and result["errors"] == [] and result["reason"] is None
    assert [d["rank"] for d in result["dumps"]] == [0, 1, 2, 3]
    assert {d["format"] for d in result["dumps"]} == {"json"}
    for dump in result["dumps"]:
        # gloo leaves pg_config's name empty; the entries' ("0", "default_pg") get its ranks.
        assert dump["pg"] == [{"name": "0", "desc": "default_pg", "ranks": [0, 1, 2, 3], "pg_id": 0,
                               "last_enqueued": 4, "last_started": -1, "last_completed": 3}]
        assert dump["entries_total"] == 4
        assert _ops(dump)[:3] == [(i, "all_reduce", "gloo") for i in (1, 2, 3)]
    assert _ops(result["dumps"][0])[3] == (4, "all_gather", "gloo")
    last = result["dumps"][3]["entries"][3]
    assert last == {"pg_name": "0", "pg_desc": "default_pg", "collective_seq_id": 4, "p2p_seq_id": 0,
                    "op": "broadcast", "backend": "gloo", "state": "scheduled", "input_sizes": [[8]],
                    "output_sizes": [[8]], "input_dtypes": ["Float"], "frame": None}
    json.dumps(result)


def test_gloo_pickles_through_the_restricted_reader_carry_frames(tmp_path: Path, make_ctx: Ctx) -> None:
    folder = _copy("behind", tmp_path / "dumps", (".pickle",))
    result = flight_recorder.run({"paths": [str(folder / "rank*")]}, make_ctx())
    assert [(d["rank"], d["format"], d["entries_total"]) for d in result["dumps"]] == [
        (0, "pickle", 6), (1, "pickle", 6), (2, "pickle", 5), (3, "pickle", 6)]
    frame = result["dumps"][0]["entries"][0]["frame"]
    assert frame.endswith(" _collectives") and "fr_gloo_dumps.py:" in frame  # the user's, not torch's
    assert result["dumps"][2]["pg"][0]["last_completed"] == 5
    json.dumps(result)


def test_the_real_h100_nccl_dump(make_ctx: Ctx) -> None:
    folder = FR / "nccl-1rank-h100"
    result = flight_recorder.run({"paths": str(folder / "fr_trace*")}, make_ctx())
    assert result["errors"] == [] and len(result["dumps"]) == 1
    dump = result["dumps"][0]
    assert (dump["path"], dump["rank"], dump["format"], dump["version"]) == (
        str(folder / "fr_trace.json"), 0, "json", "2.10")
    assert dump["pg"][0]["ranks"] == [0] and dump["pg"][0]["last_completed"] == 4
    assert _ops(dump) == [(1, "all_reduce", "nccl"), (2, "broadcast", "nccl"),
                          (3, "_all_gather_base", "nccl"), (4, "all_reduce_barrier", "nccl")]
    pickled = flight_recorder.run({"paths": str(folder / "fr_trace.pickle")}, make_ctx())["dumps"][0]
    assert pickled["format"] == "pickle" and _ops(pickled) == _ops(dump)
    assert pickled["entries"][0]["frame"].endswith("fr_dump.py:39 main")


def test_truncated_and_garbage_files_land_in_errors(tmp_path: Path, make_ctx: Ctx) -> None:
    folder = _copy("in-sync", tmp_path / "dumps", (".pickle",))
    data = (folder / "rank1.pickle").read_bytes()
    (folder / "rank1.pickle").write_bytes(data[: len(data) // 2])
    (folder / "rank2.pickle").write_bytes(os.urandom(64).replace(b"\x80", b"\x81"))
    (folder / "rank3.json").write_text('{"entries": [{"collective_seq_id": 1,')
    result = flight_recorder.run({"paths": str(folder / "*")}, make_ctx())
    errors = {Path(e["path"]).name: e["reason"] for e in result["errors"]}
    assert set(errors) == {"rank1.pickle", "rank2.pickle", "rank3.json"}
    assert errors["rank1.pickle"].startswith("not a readable pickle")
    assert errors["rank3.json"].startswith("not valid JSON")
    # rank 3's pickle beside its broken JSON is still read; rank 0 untouched.
    assert [(d["rank"], d["format"]) for d in result["dumps"]] == [(0, "pickle"), (3, "pickle")]


class _Exploit:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("protocol", [0, 2, 4, 5])
def test_a_malicious_pickle_is_refused_and_never_runs(tmp_path: Path, make_ctx: Ctx, protocol: int) -> None:
    marker = tmp_path / "pwned"
    folder = _copy("in-sync", tmp_path / "dumps", (".pickle",))
    payload = {"version": "2.10", "entries": [_Exploit(marker)]}
    (folder / "rank2.pickle").write_bytes(pickle.dumps(payload, protocol=protocol))
    result = flight_recorder.run({"paths": str(folder / "*.pickle")}, make_ctx())
    assert not marker.exists()
    [error] = result["errors"]
    assert error["path"] == str(folder / "rank2.pickle")
    assert error["reason"].startswith("refused: the pickle names the global")
    assert "system" in error["reason"]
    assert [d["rank"] for d in result["dumps"]] == [0, 1, 3]
    with pytest.raises(_fr_pickle.UnsafePickleError):
        _fr_pickle.load_file(str(folder / "rank2.pickle"))
    assert not marker.exists()


class _Plain:
    pass


@pytest.mark.parametrize("value", [
    _Plain(), {1, 2}, frozenset([1]), complex(1, 2), bytearray(b"x"), range(3), Path("/etc"),
    {"ok": [1, 2, {"nested": _Plain}]}, os.system, json.loads,
], ids=lambda v: type(v).__name__)
@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_the_restricted_reader_builds_plain_data_only(value: Any, protocol: int) -> None:
    with pytest.raises(_fr_pickle.UnsafePickleError, match="^refused: "):
        _fr_pickle.loads(pickle.dumps(value, protocol=protocol))


@pytest.mark.parametrize("data", [
    b"cos\nsystem\n(S'touch /tmp/x'\ntR.",                          # GLOBAL, protocol 0
    b"\x80\x04\x95\x00\x00\x00\x00\x00\x00\x00\x00\x8c\x02os\x8c\x06system\x93.",  # STACK_GLOBAL
    b"(cos\nsystem\nS'id'\ni.",                                     # INST
    b"\x80\x02\x82\x01.",                                           # EXT1 (copyreg's registry)
    b"\x80\x02P1\n.",                                               # a persistent id
])
def test_every_way_to_name_a_global_is_refused(data: bytes) -> None:
    with pytest.raises(_fr_pickle.UnsafePickleError):
        _fr_pickle.loads(data)


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_plain_data_reads_back(protocol: int) -> None:
    value = {"entries": [{"a": 1, "b": 2.5, "c": None, "d": True, "e": (1, "x"), "f": b"\x00", "g": [[8]]}],
             "pg_config": {"": {"name": "", "ranks": "[0, 1]"}}, 10**30: -1}
    if protocol < 3:  # Python pickles bytes as a call of _codecs.encode below protocol 3: refused
        del value["entries"][0]["f"]
    assert _fr_pickle.loads(pickle.dumps(value, protocol=protocol)) == value


def test_the_reader_bounds_size_depth_and_shared_references() -> None:
    with pytest.raises(_fr_pickle.UnsafePickleError, match="over the 10-byte limit"):
        _fr_pickle.loads(pickle.dumps(list(range(100))), limit=10)
    deep: Any = []
    for _ in range(200):
        deep = [deep]
    with pytest.raises(_fr_pickle.UnsafePickleError, match="deeper than"):
        _fr_pickle.loads(pickle.dumps(deep))
    laughs: Any = ["lol"] * 10
    for _ in range(8):
        laughs = [laughs] * 10  # 10**9 leaves from a few hundred bytes
    with pytest.raises(_fr_pickle.UnsafePickleError, match="more than"):
        _fr_pickle.loads(pickle.dumps(laughs))
    looped: list[Any] = []
    looped.append(looped)
    with pytest.raises(_fr_pickle.UnsafePickleError):
        _fr_pickle.loads(pickle.dumps(looped))
    with pytest.raises(_fr_pickle.UnsafePickleError, match="empty"):
        _fr_pickle.loads(b"")


def test_only_the_last_entries_are_kept(tmp_path: Path, make_ctx: Ctx) -> None:
    entries = [{"collective_seq_id": i, "p2p_seq_id": 0, "process_group": ["0", "default_pg"],
                "profiling_name": "nccl:all_reduce", "state": "completed"} for i in range(1, 251)]
    (tmp_path / "nccl_trace_rank_7").write_text(json.dumps({"version": "2.10", "entries": entries}))
    dump = flight_recorder.run({"paths": str(tmp_path / "nccl_trace_rank_*")}, make_ctx())["dumps"][0]
    assert dump["rank"] == 7 and dump["format"] == "json" and dump["entries_total"] == 250
    assert [e["collective_seq_id"] for e in dump["entries"]] == list(range(51, 251))


def test_nothing_found_says_where_it_looked(tmp_path: Path, make_ctx: Ctx) -> None:
    result = flight_recorder.run({"paths": [str(tmp_path / "none*")]}, make_ctx())
    assert result["found"] is False and result["dumps"] == []
    assert result["reason"] == f"no flight-recorder dump read; searched {tmp_path / 'none*'}"


@pytest.fixture
def trainer(tmp_path: Path) -> Iterator[Callable[[dict[str, str]], int]]:
    procs: list[subprocess.Popen[str]] = []

    def start(env: dict[str, str]) -> int:
        proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()", "fr-train-test"],
                                stdin=subprocess.PIPE, text=True, env={**os.environ, **env})
        procs.append(proc)
        return proc.pid

    yield start
    for proc in procs:
        proc.kill()
        proc.wait(timeout=10)


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc")
@pytest.mark.parametrize("variable", ["TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"])
def test_the_prefix_comes_from_the_training_process(
        tmp_path: Path, make_ctx: Ctx, trainer: Callable[[dict[str, str]], int], variable: str) -> None:
    prefix = tmp_path / "fr" / "trace_rank_"
    prefix.parent.mkdir()
    for rank in range(4):  # what the watchdog writes: `<prefix><rank>`, the pickle, no extension
        shutil.copy(FR / "gloo-in-sync" / f"rank{rank}.pickle", f"{prefix}{rank}")
    pid = trainer({variable: str(prefix)})
    result = flight_recorder.run({"pid": pid}, make_ctx())
    assert result["searched"] == [f"{prefix}*"]
    assert [(d["rank"], d["format"]) for d in result["dumps"]] == [(r, "pickle") for r in range(4)]
    assert flight_recorder.run({"match": "fr-train-test"}, make_ctx())["searched"] == [f"{prefix}*"]


def test_the_default_prefix_without_a_process_setting(make_ctx: Ctx) -> None:
    result = flight_recorder.run({"pid": 0}, make_ctx())
    assert result["searched"] == ["/tmp/nccl_trace_rank_*"]


@pytest.mark.parametrize("value, url", [
    (8000, "http://127.0.0.1:8000/handler/fr_trace_json"),
    ("localhost:9", "http://localhost:9/handler/fr_trace_json"),
    ("http://127.0.0.1:7/handler/fr_trace_json", "http://127.0.0.1:7/handler/fr_trace_json"),
    ("http://[::1]:7", "http://[::1]:7/handler/fr_trace_json"),
])
def test_endpoint_urls(value: Any, url: str) -> None:
    assert flight_recorder.endpoint_url(value) == url


@pytest.mark.parametrize("value", ["http://10.0.0.1:80", "https://127.0.0.1:1", "file:///etc/passwd",
                                   "example.com:80"])
def test_an_endpoint_off_the_node_is_refused(value: str, make_ctx: Ctx) -> None:
    result = flight_recorder.run({"endpoint": value}, make_ctx())
    assert result["found"] is False and result["reason"].startswith(f"endpoint {value!r} refused")


def test_an_endpoint_nobody_answers(make_ctx: Ctx) -> None:
    result = flight_recorder.run({"endpoint": 9}, make_ctx())
    assert result["found"] is False
    assert result["errors"][0]["path"] == "http://127.0.0.1:9/handler/fr_trace_json"


SERVER = """
import datetime, os, socket, sys
os.environ["TORCH_FR_BUFFER_SIZE"] = "100"
import torch, torch.distributed as dist
from torch._C._distributed_c10d import _WorkerServer
with socket.socket() as s:
    s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
for _ in range(3):
    dist.all_reduce(torch.ones(4))
server = _WorkerServer("127.0.0.1", 0)
print(server.port, flush=True)
sys.stdin.read()
server.shutdown()
"""


def _has_worker_server() -> bool:
    code = "from torch._C._distributed_c10d import _WorkerServer"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60).returncode == 0


@pytest.mark.skipif(not _has_worker_server(), reason="needs torch with the debug worker server (2.10+)")
def test_a_live_torch_debug_worker_server(make_ctx: Ctx) -> None:
    proc = subprocess.Popen([sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        result = flight_recorder.run({"endpoint": port}, make_ctx(timeout=15))
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert result["errors"] == [] and result["found"] is True
    [dump] = result["dumps"]
    assert (dump["rank"], dump["format"]) == (0, "json")
    assert _ops(dump) == [(i, "all_reduce", "gloo") for i in (1, 2, 3)]
