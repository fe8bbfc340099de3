"""The `stack` check: py-spy dumps of a real two-rank gloo job whose ranks wait in different collectives."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from runbook.checks.base import CheckContext
from runbook.checks.distributed import stack

REPO = Path(__file__).resolve().parents[3]
DATA = Path(__file__).resolve().parents[1] / "data"
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from scenarios.jobs import Scenario, ScenarioError, start  # noqa: E402

BIN = os.path.dirname(sys.executable)
PY_SPY = shutil.which("py-spy") or shutil.which("py-spy", path=BIN)
SCENARIO_PY = "ddp_mismatch/train.py"  # scenarios/jobs/ now, scenarios/ in the recorded dumps


def _has_torch() -> bool:
    code = "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)"
    return subprocess.run([sys.executable, "-c", code], timeout=30).returncode == 0


needs_job = pytest.mark.skipif(PY_SPY is None or not _has_torch() or not Path("/proc").is_dir(),
                               reason="needs py-spy, torch and Linux /proc")


@pytest.fixture(scope="module")
def ddp_job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Scenario, str]]:
    """The ddp_mismatch scenario, hung: rank 0 in the extra all_reduce, rank 1 in barrier."""
    tag = f"stack-test-{uuid.uuid4().hex[:12]}"
    try:
        job = start("ddp_mismatch", tmp_path_factory.mktemp("ddp"), speed=4, extra_args=["--tag", tag])
    except ScenarioError as exc:
        pytest.skip(str(exc))
    try:
        entered = (job.wait_for_log(r"rank 0 entering extra all_reduce", timeout=90)
                   and job.wait_for_log(r"rank 1 entering barrier", timeout=30))
        assert entered, job.read_log()
        time.sleep(0.3)  # from the log line into the collective call
        yield job, tag
    finally:
        assert job.stop()


def probe(request: dict[str, Any], env: dict[str, str] | None = None,
          prefix: list[str] | None = None) -> dict[str, Any]:
    env = {**(env or os.environ), "PYTHONPATH": str(REPO / "engine"),
           "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run([*(prefix or []), sys.executable, "-m", "runbook.probe"],
                          input=json.dumps(request), capture_output=True, text=True, cwd=REPO, env=env,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert "error" not in answer, answer.get("traceback")
    return answer["result"]


# -- the real job --------------------------------------------------------------------------------


@needs_job
def test_probe_finds_the_ranks_waiting_in_different_collectives(ddp_job: tuple[Scenario, str]) -> None:
    job, tag = ddp_job
    result = probe({"check": "stack", "with": {"match": f"--tag {tag}"}, "timeout": 30})
    assert result["available"] is True, result["reason"]
    assert result["found"] is True and result["how"] == "match"
    assert result["permission_denied"] is False
    ranks = result["ranks"]
    assert set(ranks) == {"0", "1"}
    assert (ranks["0"]["wait"], ranks["0"]["op"]) == ("collective", "all_reduce")
    assert (ranks["1"]["wait"], ranks["1"]["op"]) == ("collective", "barrier")
    assert SCENARIO_PY in ranks["0"]["user_frame"] and ranks["0"]["user_frame"].endswith(" validate")
    assert SCENARIO_PY in ranks["1"]["user_frame"] and ranks["1"]["user_frame"].endswith(" save_checkpoint")
    assert result["distinct_ops"] == ["all_reduce", "barrier"]
    assert result["mismatched"] is True
    assert result["odd_ranks"] and set(result["odd_ranks"]) <= {0, 1}
    roles = {p["pid"]: p["role"] for p in result["processes"]}
    assert roles[job.pid] == "launcher"  # carries RANK=0 itself, but its children carry 0 and 1
    assert sorted(roles.values()) == ["launcher", "rank", "rank"]
    rank0 = next(p for p in result["processes"] if p["role"] == "rank" and p["rank"] == 0)
    main = next(t for t in rank0["threads"] if t["name"] == "MainThread")
    assert main["innermost"].endswith("distributed_c10d.py:" + main["innermost"].split(":")[-1])
    assert "torch/distributed/distributed_c10d.py" in main["frames"][0]
    assert len(main["frames"]) <= 8


@needs_job
def test_native_dump_still_names_the_python_collective(
    ddp_job: tuple[Scenario, str], make_ctx: Callable[..., CheckContext],
) -> None:
    _job, tag = ddp_job
    found = stack.run({"match": f"--tag {tag} .*--rank 1|--rank 1 .*--tag {tag}"}, make_ctx(30))
    assert found["found"], found["reason"]
    pid = found["processes"][0]["pid"]
    result = stack.run({"pid": pid, "native": True}, make_ctx(30))
    entry = result["processes"][0]
    assert (entry["rank"], entry["main_wait"], entry["main_op"]) == (1, "collective", "barrier")
    main = next(t for t in entry["threads"] if t["name"] == "MainThread")
    assert any("(libc" in frame for frame in main["frames"])  # native frames are there
    assert all(len(frame) < 400 for frame in main["frames"])
    assert result["ranks"]["1"]["op"] == "barrier" and result["mismatched"] is False


@needs_job
def test_permission_denied_as_an_unprivileged_user(ddp_job: tuple[Scenario, str]) -> None:
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        pytest.skip("needs root and setpriv to run the probe as nobody")
    job, _tag = ddp_job
    prefix = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    if subprocess.run([*prefix, sys.executable, "-c", "pass"], capture_output=True,
                      timeout=30).returncode != 0:
        pytest.skip("nobody cannot run this Python")
    result = probe({"check": "stack", "with": {"pid": job.pid, "py_spy": PY_SPY}, "timeout": 20},
                   env={"HOME": "/tmp", "PATH": os.environ.get("PATH", "")}, prefix=prefix)
    assert result["found"] is True
    assert result["permission_denied"] is True
    assert result["available"] is False
    assert "CAP_SYS_PTRACE" in result["reason"] and "--cap-add SYS_PTRACE" in result["reason"]
    assert "ptrace_scope" in result["reason"]
    assert result["processes"][0]["error"]


# -- recorded dumps (captured from the scenario above) -----------------------------------------


def _recorded(name: str) -> list[dict[str, Any]]:
    return json.loads((DATA / name).read_text())


@pytest.mark.parametrize(("name", "op", "function"), [
    ("pyspy_ddp_mismatch_rank0.json", "all_reduce", "validate"),
    ("pyspy_ddp_mismatch_rank1.json", "barrier", "save_checkpoint"),
    ("pyspy_ddp_mismatch_rank0_native.json", "all_reduce", "validate"),
    ("pyspy_ddp_mismatch_rank1_native.json", "barrier", "save_checkpoint"),
])
def test_recorded_dumps_are_classified(name: str, op: str, function: str) -> None:
    threads = _recorded(name)
    main = stack.describe_thread(threads[0])
    assert (main["waits"], main["op"]) == ("collective", op)
    assert main["idle"] is True and main["name"] == "MainThread"
    assert main["user_frame"].split(":")[0].endswith(SCENARIO_PY)
    assert main["user_frame"].endswith(f" {function}")


def test_recorded_dumps_compared() -> None:
    entries = []
    for rank in (0, 1):
        entry = {"pid": 100 + rank, "ppid": 1, "rank": rank, "role": "rank", "error": None}
        stack._attach_threads(entry, _recorded(f"pyspy_ddp_mismatch_rank{rank}.json"))
        entries.append(entry)
    # the recorded dumps carry their own pids; the main thread is found by name then
    compared = stack.compare_ranks(entries)
    assert compared["distinct_ops"] == ["all_reduce", "barrier"]
    assert compared["mismatched"] is True
    assert compared["odd_ranks"] == [1]  # a 1:1 tie goes to the group holding rank 0
    assert compared["majority"] == {"wait": "collective", "op": "all_reduce", "count": 1}


# -- classification --------------------------------------------------------------------------


def _frame(path: str, name: str, line: int = 10, module: str | None = None) -> dict[str, Any]:
    return {"name": name, "filename": path, "module": module, "short_filename": os.path.basename(path),
            "line": line}


SITE = "/venv/lib/python3.11/site-packages"
STDLIB = "/usr/lib/python3.11"
USER = _frame("/job/train.py", "train_step", 42)


@pytest.mark.parametrize(("frames", "expected"), [
    ([_frame(f"{SITE}/torch/distributed/distributed_c10d.py", "all_gather_into_tensor"), USER],
     ("collective", "all_gather_into_tensor")),
    ([_frame(f"{STDLIB}/threading.py", "Condition.wait"),
      _frame(f"{STDLIB}/multiprocessing/queues.py", "get"),
      _frame(f"{SITE}/torch/utils/data/dataloader.py", "_MultiProcessingDataLoaderIter._try_get_data"),
      _frame(f"{SITE}/torch/utils/data/dataloader.py", "_MultiProcessingDataLoaderIter._next_data"), USER],
     ("dataloader", "_try_get_data")),
    ([_frame(f"{STDLIB}/selectors.py", "PollSelector.select"),
      _frame(f"{STDLIB}/multiprocessing/connection.py", "wait"),
      _frame(f"{SITE}/torch/utils/data/dataloader.py", "_next_data"), USER],
     ("dataloader", "_next_data")),  # the DataLoader wins over the select() it waits in
    ([_frame(f"{SITE}/ray/_private/worker.py", "Worker.get_objects"),
      _frame(f"{SITE}/ray/_private/worker.py", "get"), USER], ("ray", "ray.get")),
    ([_frame(f"{SITE}/ray/_private/worker.py", "wait"), USER], ("ray", "ray.wait")),
    ([_frame(f"{SITE}/torch/cuda/__init__.py", "synchronize"), USER], ("cuda-sync", "synchronize")),
    ([_frame("/usr/lib/libcudart.so.12", "cudaStreamSynchronize", 0, "/usr/lib/libcudart.so.12"),
      USER], ("cuda-sync", "cudaStreamSynchronize")),
    ([_frame(f"{STDLIB}/socket.py", "socket.recv_into"), _frame(f"{STDLIB}/http/client.py", "read"), USER],
     ("io", "recv_into")),
    ([_frame("/x/libtorch_cpu.so", "c10d::ProcessGroupNCCL::WorkNCCL::wait", 0, "/x/libtorch_cpu.so"),
      _frame(f"{SITE}/torch/nn/parallel/distributed.py", "DistributedDataParallel.forward"), USER],
     ("collective", "wait")),
    ([USER], ("running", None)),
])
def test_classify(frames: list[dict[str, Any]], expected: tuple[str, str | None]) -> None:
    assert stack.classify(frames) == expected


def test_idle_thread_and_user_frame() -> None:
    raw = {"thread_id": 7, "thread_name": "Thread-1", "active": False,
           "frames": [_frame(f"{STDLIB}/threading.py", "Condition.wait"),
                      _frame("<frozen importlib._bootstrap>", "_call_with_frames_removed"),
                      _frame(f"{SITE}/pkg/mod.py", "helper"), USER]}
    thread = stack.describe_thread(raw)
    assert (thread["waits"], thread["op"], thread["idle"]) == ("idle", None, True)
    assert thread["user_frame"] == "/job/train.py:42 train_step"
    assert thread["innermost"] == f"{STDLIB}/threading.py:10 Condition.wait"
    busy = stack.describe_thread({**raw, "active": True})
    assert busy["waits"] == "running"


def _entry(pid: int, rank: int | None, wait: str, op: str | None, ppid: int = 1) -> dict[str, Any]:
    return {"pid": pid, "ppid": ppid, "rank": rank, "role": "rank", "main_wait": wait, "main_op": op,
            "main_user_frame": None}


def test_compare_all_in_the_same_collective_is_no_mismatch() -> None:
    entries = [_entry(10 + r, r, "collective", "all_reduce") for r in range(4)]
    compared = stack.compare_ranks(entries)
    assert compared["mismatched"] is False and compared["odd_ranks"] == []
    assert compared["distinct_ops"] == ["all_reduce"]


def test_compare_one_rank_outside_the_collective() -> None:
    entries = [_entry(10 + r, r, "collective", "all_reduce") for r in range(3)]
    entries.append(_entry(13, 3, "dataloader", "_next_data"))
    compared = stack.compare_ranks(entries)
    assert compared["mismatched"] is True and compared["odd_ranks"] == [3]
    assert compared["majority"] == {"wait": "collective", "op": "all_reduce", "count": 3}


def test_compare_ignores_undumped_ranks() -> None:
    entries = [_entry(10, 0, "collective", "barrier"), {**_entry(11, 1, "", None), "main_wait": None}]
    compared = stack.compare_ranks(entries)
    assert compared["ranks"]["1"]["wait"] is None
    assert compared["mismatched"] is False and compared["odd_ranks"] == []


def test_roles_launcher_and_workers() -> None:
    entries = [
        {"pid": 1, "ppid": 0, "rank": None, "role": "rank"},     # torchrun agent
        {"pid": 2, "ppid": 1, "rank": 0, "role": "rank"},
        {"pid": 3, "ppid": 1, "rank": 1, "role": "rank"},
        {"pid": 4, "ppid": 2, "rank": 0, "role": "rank"},        # DataLoader worker of rank 0
        {"pid": 5, "ppid": 2, "rank": 0, "role": "rank"},
    ]
    stack.assign_roles(entries)
    assert [e["role"] for e in entries] == ["launcher", "rank", "rank", "worker", "worker"]


# -- errors ----------------------------------------------------------------------------------


# What py-spy 0.4.3 printed on stderr, run as nobody against root's process.
DENIED_LINE = ("Permission Denied: Try running again with elevated permissions by going "
               "'sudo env \"PATH=$PATH\" !!'")
PERMISSION_STDERR = f"""{DENIED_LINE}
Error: Failed to find python version from target process

Stack backtrace:
   0: anyhow::error::<impl anyhow::Error>::msg
   1: py_spy::python_process_info::get_python_version
"""


def test_permission_error_text() -> None:
    assert stack.is_permission_error(PERMISSION_STDERR)
    assert stack.is_permission_error("Error: Operation not permitted (os error 1)")
    assert not stack.is_permission_error("Error: Failed to get process executable name.")
    assert stack.pyspy_error(PERMISSION_STDERR) == (
        f"{DENIED_LINE}; Error: Failed to find python version from target process")
    reason = stack.permission_reason([123])
    assert "pid 123" in reason and "CAP_SYS_PTRACE" in reason and "ptrace_scope=0" in reason


def test_py_spy_missing(make_ctx: Callable[..., CheckContext]) -> None:
    result = stack.run({"pid": os.getpid(), "py_spy": "/nonexistent/py-spy"}, make_ctx())
    assert result["available"] is False and "py-spy not found" in result["reason"]


@pytest.mark.skipif(PY_SPY is None, reason="needs py-spy")
def test_no_process_found(make_ctx: Callable[..., CheckContext]) -> None:
    result = stack.run({"match": f"no-such-process-{uuid.uuid4().hex}", "py_spy": PY_SPY}, make_ctx())
    assert result["found"] is False and result["available"] is True
    assert "no process command line matches" in result["reason"]


@pytest.mark.skipif(PY_SPY is None, reason="needs py-spy")
def test_not_a_python_process(make_ctx: Callable[..., CheckContext]) -> None:
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        result = stack.run({"pid": sleeper.pid, "py_spy": PY_SPY}, make_ctx(10))
    finally:
        sleeper.kill()
        sleeper.wait()
    assert result["found"] is True and result["available"] is False
    assert result["permission_denied"] is False
    assert result["processes"][0]["error"] and "1 of 1 processes not dumped" in result["reason"]


# -- locks (#29): the torch extensions lock, a lock a thread waits on ------------------------------


@pytest.mark.parametrize(("frames", "expected"), [
    ([_frame(f"{SITE}/torch/utils/file_baton.py", "FileBaton.wait"),
      _frame(f"{SITE}/torch/utils/cpp_extension.py", "_jit_compile"), USER],
     ("extension-lock", "FileBaton.wait")),
    ([_frame(f"{STDLIB}/logging/__init__.py", "Handler.acquire"),
      _frame(f"{STDLIB}/logging/__init__.py", "Handler.handle"), USER], ("lock", "acquire")),
    ([_frame(f"{STDLIB}/multiprocessing/synchronize.py", "SemLock.__enter__"), USER], ("lock", "__enter__")),
])
def test_classify_locks(frames: list[dict[str, Any]], expected: tuple[str, str | None]) -> None:
    assert stack.classify(frames) == expected


def test_idle_thread_in_a_futex_wait_waits_on_a_lock() -> None:
    """threading.Lock.acquire has no Python frame: the kernel's futex wait says it is a lock."""
    raw = {"thread_id": 7, "thread_name": "MainThread", "active": False,
           "frames": [_frame("/job/train.py", "TokenCache.lookup", 61),
                      _frame(f"{SITE}/torch/utils/data/_utils/worker.py", "_worker_loop", 308)]}
    thread = stack.describe_thread(raw, "futex_wait_queue")
    assert (thread["waits"], thread["op"], thread["wchan"]) == ("lock", "lookup", "futex_wait_queue")
    assert stack.describe_thread(raw, "do_select")["waits"] == "idle"  # asleep, not on a lock
    assert stack.describe_thread(raw)["waits"] == "idle"  # wchan unknown: say no more than py-spy
    assert stack.describe_thread({**raw, "active": True}, "futex_wait_queue")["waits"] == "running"


def test_wchan_of_a_thread_blocked_on_a_lock() -> None:
    import threading

    lock = threading.Lock()
    lock.acquire()
    ids: list[int] = []
    waiter = threading.Thread(target=lambda: (ids.append(threading.get_native_id()), lock.acquire()))
    waiter.start()
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not (stack.wchan(os.getpid(), ids[0] if ids else 0) or
                                                   "").startswith("futex"):
            time.sleep(0.02)
        found = stack.wchan(os.getpid(), ids[0])
        if found is None:
            pytest.skip("this kernel hides wchan")
        assert found.startswith("futex"), found
    finally:
        lock.release()
        waiter.join()
    assert stack.wchan(os.getpid(), 0) is None and stack.wchan(os.getpid(), "x") is None


def test_locked_lists_the_processes_whose_main_thread_waits_on_a_lock() -> None:
    entries = [{"pid": 10, "ppid": 1, "rank": None, "role": "rank", "main_wait": "dataloader",
                "main_op": "_try_get_data"},
               {"pid": 11, "ppid": 10, "rank": None, "role": "worker", "main_wait": "lock",
                "main_op": "lookup", "main_frame": "/job/train.py:61 TokenCache.lookup",
                "main_user_frame": "/job/train.py:61 TokenCache.lookup", "main_wchan": "futex_wait_queue",
                "extensions_dir": None},
               {"pid": 12, "ppid": 1, "rank": 0, "role": "rank", "main_wait": "extension-lock",
                "main_op": "FileBaton.wait", "extensions_dir": "/tmp/ext"}]
    found = stack.locked(entries)
    assert [(f["pid"], f["role"], f["wait"]) for f in found] == [(11, "worker", "lock"),
                                                                 (12, "rank", "extension-lock")]
    assert found[0]["wchan"] == "futex_wait_queue" and found[0]["frame"].endswith("lookup")
    assert found[1]["extensions_dir"] == "/tmp/ext"


def test_entries_keep_every_process_and_its_extensions_dir() -> None:
    """Processes whose environment the selection already read are entries too (with their
    TORCH_EXTENSIONS_DIR), as are those it did not."""
    me = os.getpid()
    stat = {"ppid": os.getppid(), "state": "R"}
    selected = {me: {"stat": stat, "env": {"RANK": "0", "TORCH_EXTENSIONS_DIR": "/scratch/ext"}},
                os.getppid(): {"stat": {"ppid": 1, "state": "S"}}}
    entries = stack._entries(selected)
    assert sorted(e["pid"] for e in entries) == sorted(selected)
    mine = next(e for e in entries if e["pid"] == me)
    assert (mine["rank"], mine["extensions_dir"]) == (0, "/scratch/ext")


def test_a_dump_that_failed_once_is_tried_again(make_ctx: Callable[..., CheckContext],
                                                 tmp_path: Path) -> None:
    """py-spy reads a running interpreter from outside and can fail on a loaded machine: a failed
    dump is tried once more (not one refused for permission, nor one that ran out of time)."""
    fake = tmp_path / "py-spy"
    tried = tmp_path / "tried"
    fake.write_text("#!/bin/sh\n"
                    f"if [ ! -e {tried} ]; then touch {tried}; "
                    "echo 'Error: Failed to copy PyInterpreterState from process' >&2; exit 1; fi\n"
                    "echo '[]'\n")
    fake.chmod(0o755)
    threads, error, denied = stack.dump(str(fake), os.getpid(), False, make_ctx())
    assert (threads, error, denied) == ([], None, False)
    refused = tmp_path / "refused"
    refused.write_text("#!/bin/sh\necho 'Error: Operation not permitted (os error 1)' >&2\nexit 1\n")
    refused.chmod(0o755)
    threads, error, denied = stack.dump(str(refused), os.getpid(), False, make_ctx())
    assert threads is None and denied is True
