"""The `nccl` check on real processes: their NCCL env, the libnccl files they map, the flight recorder."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from runbook.checks.base import CheckContext
from runbook.checks.distributed import nccl

REPO = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs Linux /proc")

BANNER = b"NCCL version 2.19.3+cuda12.2\x00"
LOADER = """
import ctypes, sys
for path in sys.argv[1:]:
    ctypes.CDLL(path)
print("loaded", flush=True)
sys.stdin.read()
"""


def _small_shared_library() -> str | None:
    """A real, small shared library to copy: the libz this Python maps, else a usual place."""
    import zlib  # noqa: F401  (maps libz where zlib is not built in)

    with open("/proc/self/maps") as fh:
        for line in fh:
            path = line.split()[-1]
            if os.path.basename(path).startswith("libz.so") and os.path.isfile(path):
                return path
    found = glob.glob("/lib/*/libz.so.1") + glob.glob("/usr/lib*/libz.so.1") + glob.glob("/lib*/libz.so.1")
    return found[0] if found else None


LIBZ = _small_shared_library()


@pytest.fixture
def fake_nccl(tmp_path: Path) -> dict[str, Path]:
    """Three copies of libz named like NCCL: two by file name, one carrying NCCL's banner inside."""
    if LIBZ is None:
        pytest.skip("no libz.so.1 to copy")
    paths = {"a": tmp_path / "a" / "libnccl.so.2", "b": tmp_path / "b" / "libnccl.so.2.21.5",
             "c": tmp_path / "c" / "libnccl.so"}
    for path in paths.values():
        path.parent.mkdir()
        shutil.copyfile(LIBZ, path)
    with paths["c"].open("ab") as fh:
        fh.write(BANNER)  # after the last section: the loader ignores it, the head scan finds it
    return paths


@pytest.fixture
def job() -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """job(env, libraries) -> a Python that loaded `libraries` with ctypes and waits; killed after."""
    started: list[subprocess.Popen[str]] = []

    def spawn(env: dict[str, str], libraries: list[Path]) -> subprocess.Popen[str]:
        proc = subprocess.Popen([sys.executable, "-c", LOADER, *map(str, libraries)],
                                env={**os.environ, **env}, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True)
        started.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "loaded"
        return proc

    yield spawn
    for proc in started:
        proc.kill()
        proc.wait(timeout=10)


def _nccl_env(tmp_path: Path) -> dict[str, str]:
    return {"NCCL_DEBUG": "INFO", "NCCL_IB_DISABLE": "1", "RANK": "1", "WORLD_SIZE": "2",
            "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": f"{tmp_path}/nccl_trace_rank_",
            "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000", "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
            "RUNBOOK_TEST_SECRET": "not-for-the-report"}


def test_settings_libraries_and_flight_recorder(
    tmp_path: Path, fake_nccl: dict[str, Path], job: Callable[..., subprocess.Popen[str]],
    make_ctx: Callable[..., CheckContext],
) -> None:
    dump = tmp_path / "nccl_trace_rank_0"
    dump.write_bytes(b"\x80\x04fake pickled trace")
    (tmp_path / "other_file").write_text("not a dump")
    proc = job(_nccl_env(tmp_path), [fake_nccl["a"], fake_nccl["b"], fake_nccl["c"]])
    result = nccl.run({"pid": proc.pid}, make_ctx(10))
    assert result["available"] is True, result["reason"]
    assert (result["how"], result["pid"], result["rank"]) == ("pid", proc.pid, 1)
    assert result["settings"] == {
        "NCCL_DEBUG": "INFO", "NCCL_IB_DISABLE": "1", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE":
        f"{tmp_path}/nccl_trace_rank_", "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
        "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000",
    }
    assert "not-for-the-report" not in json.dumps(result)
    libs = {lib["path"]: lib for lib in result["libraries"]}
    assert set(libs) == {str(p) for p in fake_nccl.values()}
    assert libs[str(fake_nccl["a"])]["version"] is None
    assert (libs[str(fake_nccl["b"])]["version"], libs[str(fake_nccl["b"])]["version_source"]) == (
        "2.21.5", "file_name")
    c = libs[str(fake_nccl["c"])]
    assert (c["version"], c["version_string"], c["version_source"]) == ("2.19.3", "2.19.3+cuda12.2", "binary")
    assert all(lib["kind"] == "nccl" for lib in libs.values())
    assert result["multiple_libraries"] is True
    assert result["nccl_versions"] == ["2.19.3", "2.21.5"]
    recorder = result["flight_recorder"]
    assert recorder == {"prefix": f"{tmp_path}/nccl_trace_rank_", "trace_buffer_size": 2000,
                        "dump_on_timeout": True, "count": 1}
    assert [(f["path"], f["size"]) for f in result["dump_files"]] == [(str(dump), dump.stat().st_size)]
    assert result["dump_files"][0]["mtime"][:4].isdigit()
    shm = result["shm"]
    assert shm is not None and shm["total_mib"] > 0 and 0 <= shm["used_percent"] <= 100
    assert result["shm_too_small"] is (shm["total_mib"] < nccl.SHM_MIN_MIB)


def test_one_library_through_the_probe(
    tmp_path: Path, fake_nccl: dict[str, Path], job: Callable[..., subprocess.Popen[str]],
) -> None:
    proc = job({"RANK": "0", "NCCL_SOCKET_IFNAME": "lo"}, [fake_nccl["b"]])
    env = {**os.environ, "PYTHONPATH": str(REPO / "engine")}
    request = {"check": "nccl", "with": {"pid": proc.pid}, "timeout": 10}
    done = subprocess.run([sys.executable, "-m", "runbook.probe"], input=json.dumps(request),
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=30)
    answer = json.loads(done.stdout)
    assert "error" not in answer, answer.get("traceback")
    result = answer["result"]
    assert result["available"] is True and result["timed_out"] is False
    assert result["settings"] == {"NCCL_SOCKET_IFNAME": "lo"}
    assert [lib["version"] for lib in result["libraries"]] == ["2.21.5"]
    assert result["multiple_libraries"] is False
    assert result["flight_recorder"]["prefix"] is None and result["dump_files"] == []


def test_nothing_selected(make_ctx: Callable[..., CheckContext]) -> None:
    result = nccl.run({"match": f"no-such-process-{uuid.uuid4().hex}"}, make_ctx())
    assert result["available"] is False and "no process command line matches" in result["reason"]
    assert result["pid"] is None and result["shm"] is not None  # the node's /dev/shm is still reported


def test_small_shm_is_flagged(monkeypatch: pytest.MonkeyPatch, make_ctx: Callable[..., CheckContext]) -> None:
    docker_default = {"path": "/dev/shm", "total_mib": 64.0, "free_mib": 60.0, "used_percent": 6.3}
    monkeypatch.setattr(nccl, "shm_usage", lambda _path, _shown: docker_default)
    result = nccl.run({"pid": os.getpid()}, make_ctx())
    assert result["shm"] == docker_default and result["shm_too_small"] is True


# -- the version scan ----------------------------------------------------------------------------


def _write(path: Path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


def test_banner_scan_is_bounded(tmp_path: Path, make_ctx: Callable[..., CheckContext]) -> None:
    far = _write(tmp_path / "far", b"\0" * 300_000 + BANNER)
    assert nccl.scan_banner(far, make_ctx(), limit=1_000_000) == ("2.19.3", "+cuda12.2")
    assert nccl.scan_banner(far, make_ctx(), limit=200_000) is None  # never reads past the limit


def test_banner_across_a_chunk_boundary(tmp_path: Path, make_ctx: Callable[..., CheckContext]) -> None:
    split = _write(tmp_path / "split", b"\0" * (nccl._CHUNK - 7) + BANNER)
    assert nccl.scan_banner(split, make_ctx()) == ("2.19.3", "+cuda12.2")


def test_banner_found_in_rodata(tmp_path: Path, make_ctx: Callable[..., CheckContext]) -> None:
    if LIBZ is None:
        pytest.skip("no libz.so.1 to copy")
    data = bytearray(Path(LIBZ).read_bytes())
    with open(LIBZ, "rb") as fh:
        regions = nccl._rodata(fh)
    assert regions, "libz has a .rodata section"
    offset, size = regions[0]
    assert size > 64 and offset > 64
    data[offset + 8: offset + 8 + len(BANNER)] = BANNER
    patched = _write(tmp_path / "libnccl.so", bytes(data))
    # 64 bytes are enough only because .rodata is scanned first: the file's head has no banner
    assert nccl.scan_banner(patched, make_ctx(), limit=64) == ("2.19.3", "+cuda12.2")


def test_plugins_are_not_core_libraries(tmp_path: Path, make_ctx: Callable[..., CheckContext]) -> None:
    mapped = [(str(tmp_path / "libnccl.so.2.21.5"), "08:01:11"),
              (str(tmp_path / "libnccl-net.so"), "08:01:12")]
    described: dict[str, Any] = nccl.describe_libraries(os.getpid(), mapped, make_ctx())
    assert [lib["kind"] for lib in described["libraries"]] == ["nccl", "plugin"]
    assert described["multiple_libraries"] is False and described["nccl_versions"] == ["2.21.5"]


def test_flight_recorder_read_under_torchs_new_names(tmp_path: Path) -> None:
    # torch 2.11 warns "TORCH_NCCL_TRACE_BUFFER_SIZE is deprecated; use TORCH_FR_BUFFER_SIZE"
    # (seen on a real H100/H200): the new names come first, the old ones still count.
    (tmp_path / "fr_rank_0").write_bytes(b"\x80\x04trace")
    new = {"TORCH_FR_DUMP_TEMP_FILE": f"{tmp_path}/fr_rank_", "TORCH_FR_BUFFER_SIZE": "4000",
           "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": f"{tmp_path}/old_", "TORCH_NCCL_TRACE_BUFFER_SIZE": "10",
           "TORCH_NCCL_DUMP_ON_TIMEOUT": "1"}
    found = nccl.flight_recorder(os.getpid(), new)
    assert found["flight_recorder"] == {"prefix": f"{tmp_path}/fr_rank_", "trace_buffer_size": 4000,
                                        "dump_on_timeout": True, "count": 1}
    old = {"TORCH_NCCL_DEBUG_INFO_TEMP_FILE": f"{tmp_path}/fr_rank_", "TORCH_NCCL_TRACE_BUFFER_SIZE": "10"}
    assert nccl.flight_recorder(os.getpid(), old)["flight_recorder"]["trace_buffer_size"] == 10
    assert set(nccl.nccl_settings(new)) == set(new)


def test_a_container_images_nccl_version_is_not_a_setting() -> None:
    env = {"NCCL_VERSION": "2.28.3-1", "NCCL_DEBUG": "WARN", "PATH": "/usr/bin"}
    assert nccl.nccl_settings(env) == {"NCCL_DEBUG": "WARN"}
