"""`ray`: real local Ray clusters (the two Ray scenarios), no cluster, no ray, fake `ray` packages.

The scenario tests start real jobs that run their own Ray cluster (a few seconds each on a
small machine), so each scenario is started once per module and always stopped, and the
tests check that no process of it (GCS, raylet, workers) survives the stop.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from runbook.checks.base import CheckContext
from runbook.checks.distributed import ray_state

REPO = Path(__file__).resolve().parents[3]
HAS_RAY = importlib.util.find_spec("ray") is not None
needs_ray = pytest.mark.skipif(not HAS_RAY, reason="ray is not installed in this Python")
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
START_TIMEOUT = 120.0  # a local Ray cluster on a busy 2-core machine can take a while
MakeCtx = Callable[..., CheckContext]


def probe(request: dict[str, Any], python: list[str] | None = None, timeout: float = 60) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO / "engine")}
    done = subprocess.run([*(python or [sys.executable]), "-m", "runbook.probe"],
                          input=json.dumps(request), capture_output=True, text=True, cwd=REPO,
                          env=env, timeout=timeout)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def isolated_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """os.environ without any Ray address, with an empty Ray temp dir."""
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_TMPDIR")}
    env["RAY_TMPDIR"] = str(tmp_path / "raytmp")
    env.update(extra)
    return env


@pytest.fixture
def listening() -> Iterator[str]:
    """host:port of a socket that accepts connections and says nothing (a GCS that answers TCP)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield f"127.0.0.1:{server.getsockname()[1]}"


def fake_ray(tmp_path: Path, body: str) -> dict[str, str]:
    """An env whose PYTHONPATH puts a fake `ray` package first (for the child process only)."""
    pkg = tmp_path / "fake" / "ray"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(body)
    return isolated_env(tmp_path, PYTHONPATH=str(pkg.parent))


# -- no ray, no cluster ------------------------------------------------------------------------


def _pythons_without_ray() -> list[list[str]]:
    """`python -S` (no site-packages) always; the system python3 too when it lacks ray."""
    found = [[sys.executable, "-S"]]
    for candidate in ("/usr/bin/python3",):
        if os.path.exists(candidate) and subprocess.run(
                [candidate, "-c", "import importlib.util as u, sys; "
                                  "sys.exit(u.find_spec('ray') is not None)"],
                capture_output=True, timeout=20).returncode == 0:
            found.append([candidate])
    return found


@pytest.mark.parametrize("python", _pythons_without_ray(), ids=lambda p: " ".join(p))
def test_ray_missing(python: list[str], tmp_path: Path) -> None:
    # The interpreter is named: by default the check uses the training process's Python.
    wrapper = tmp_path / "python-without-ray"
    wrapper.write_text("#!/bin/sh\nexec " + " ".join(python) + ' "$@"\n')
    wrapper.chmod(0o755)
    start = time.monotonic()
    answer = probe({"check": "ray", "with": {"python": str(wrapper)}, "timeout": 10},
                   python=python)
    result = answer["result"]
    assert result["available"] is False
    assert result["running"] is False
    assert "ray is not importable" in result["reason"]
    assert "pip install 'ray[default]'" in result["reason"]
    assert result["timed_out"] is False
    assert time.monotonic() - start < 10


@needs_ray
def test_no_cluster_on_this_node(tmp_path: Path, make_ctx: MakeCtx,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ray_state, "raylet_gcs_addresses", lambda: [])
    start = time.monotonic()
    result = ray_state.run({}, make_ctx(10.0, env=isolated_env(tmp_path)))
    assert time.monotonic() - start < 2
    assert result["available"] is True
    assert result["running"] is False
    assert result["reason"] == "no Ray cluster on this node"
    assert result["address"] is None and result["actor_init_stuck"] is None


@needs_ray
def test_stale_cluster_file_and_dead_address(tmp_path: Path, make_ctx: MakeCtx,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ray_state, "raylet_gcs_addresses", lambda: [])
    env = isolated_env(tmp_path)
    (tmp_path / "raytmp" / "ray").mkdir(parents=True)
    (tmp_path / "raytmp" / "ray" / "ray_current_cluster").write_text("127.0.0.1:9\n")
    result = ray_state.run({"address": "auto"}, make_ctx(10.0, env=env))
    assert result["running"] is False
    assert result["reason"].startswith("no Ray cluster on this node (")
    assert "ray_current_cluster names 127.0.0.1:9" in result["reason"]

    env_address = ray_state.run({}, make_ctx(10.0, env={**env, "RAY_ADDRESS": "127.0.0.1:9"}))
    assert "RAY_ADDRESS names 127.0.0.1:9" in env_address["reason"]

    start = time.monotonic()
    explicit = probe({"check": "ray", "with": {"address": "127.0.0.1:9"}, "timeout": 10})["result"]
    assert time.monotonic() - start < 10
    assert explicit["available"] is True and explicit["running"] is False
    assert explicit["reason"].startswith("no Ray cluster at 127.0.0.1:9 (")


@linux_only
def test_raylet_discovery_reads_gcs_address_from_proc(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    for pid, argv, ticks in [
        (10, [".../ray/core/src/ray/raylet/raylet", "--node_ip_address=10.0.0.5",
              "--gcs-address=10.0.0.1:6379"], 100),
        (11, ["/usr/bin/python3", "train.py", "--gcs-address=1.1.1.1:1"], 300),
        (12, ["/opt/ray/raylet", "--gcs-address=10.0.0.2:6379"], 200),
    ]:
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
        fields = ["S"] + ["0"] * 18 + [str(ticks)] + ["0"] * 5
        (proc / str(pid) / "stat").write_text(f"{pid} (raylet) " + " ".join(fields))
    assert ray_state.raylet_gcs_addresses(proc) == ["10.0.0.2:6379", "10.0.0.1:6379"]


# -- the child process, with fake ray packages ---------------------------------------------------


@needs_ray
def test_ray_that_fails_to_import(tmp_path: Path, make_ctx: MakeCtx, listening: str) -> None:
    env = fake_ray(tmp_path, "raise ImportError('libray.so: cannot open shared object file')\n")
    result = ray_state.run({"address": listening}, make_ctx(20.0, env=env))
    assert result["available"] is False
    assert "libray.so" in result["reason"] and "pip install" in result["reason"]


@needs_ray
def test_connection_failure(tmp_path: Path, make_ctx: MakeCtx, listening: str) -> None:
    env = fake_ray(tmp_path, "__version__ = '9.9.9'\n"
                             "def init(**kw):\n"
                             "    raise ConnectionError('Version mismatch: cluster 2.9.0, this 9.9.9')\n")
    result = ray_state.run({"address": listening}, make_ctx(20.0, env=env))
    assert result["available"] is True and result["running"] is None
    assert result["ray_version"] == "9.9.9"
    assert result["reason"] == (f"could not connect to Ray at {listening}: "
                                "ConnectionError: Version mismatch: cluster 2.9.0, this 9.9.9")


@needs_ray
def test_hanging_ray_is_killed_with_its_group(tmp_path: Path, make_ctx: MakeCtx,
                                              listening: str) -> None:
    pidfile = tmp_path / "pid"
    env = fake_ray(tmp_path, f"import os, time\nopen({str(pidfile)!r}, 'w').write(str(os.getpid()))\n"
                             "__version__ = '2.0'\n"
                             "def init(**kw):\n    time.sleep(60)\n")
    start = time.monotonic()
    result = ray_state.run({"address": listening}, make_ctx(3.0, env=env))
    assert time.monotonic() - start < 6
    assert result["timed_out"] is True and result["running"] is None
    assert result["ray_version"] == "2.0"  # printed before the hang: kept
    assert result["reason"].startswith("Ray did not answer within")
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{pid}").exists() or "Z" in _state(pid)


@needs_ray
def test_partial_answer_when_ray_hangs_after_connecting(tmp_path: Path, make_ctx: MakeCtx,
                                                       listening: str) -> None:
    env = fake_ray(tmp_path, "import time\n__version__ = '2.1'\n"
                             "def init(**kw):\n    pass\n"
                             "def nodes():\n    time.sleep(60)\n")
    result = ray_state.run({"address": listening}, make_ctx(3.0, env=env))
    assert result["timed_out"] is True and result["running"] is True
    assert result["reason"].endswith("partial result (not read: actors, tasks)")
    assert result["actors"] is None and result["actor_init_stuck"] is None


def test_discovery_order_and_dashboard_addresses_ignored(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ray_state, "raylet_gcs_addresses", lambda: ["10.0.0.3:6379"])
    env = isolated_env(tmp_path, RAY_ADDRESS="10.0.0.1:6379")
    (tmp_path / "raytmp" / "ray").mkdir(parents=True)
    (tmp_path / "raytmp" / "ray" / "ray_current_cluster").write_text("10.0.0.2:6379\n")
    assert [a for a, _ in ray_state.discover(env)] == ["10.0.0.1:6379", "10.0.0.2:6379",
                                                      "10.0.0.3:6379"]
    env["RAY_ADDRESS"] = "http://127.0.0.1:8265"
    assert [a for a, _ in ray_state.discover(env)] == ["10.0.0.2:6379", "10.0.0.3:6379"]


def _state(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "gone"
    return raw[raw.rfind(")") + 2:].split()[0]


# -- the summary, on recorded shapes --------------------------------------------------------------


NOW = 1_800_000_000_000.0


def _task(name: str, state: str, typ: str = "ACTOR_TASK", actor: str | None = "a1",
          created: float | None = NOW - 100_000, started: float | None = None,
          ended: float | None = None, res: dict[str, float] | None = None) -> dict[str, Any]:
    return {"task_id": name, "attempt": 0, "name": name, "type": typ, "state": state,
            "actor_id": actor, "creation_ms": created, "start_ms": started, "end_ms": ended,
            "required_resources": res or {}}


def test_summary_of_a_gpu_actor_on_a_cpu_cluster_and_dead_actors() -> None:
    raw = {
        "now_ms": NOW,
        "node_list": [{"node_id": "n1", "ip": "10.0.0.1", "state": "ALIVE",
                       "resources": {"CPU": 8.0, "memory": 1e9}},
                      {"node_id": "n0", "ip": "10.0.0.9", "state": "DEAD", "resources": {"GPU": 1.0}}],
        "resources": {"total": {"CPU": 8.0, "memory": 1e9}, "available": {"memory": 1e9}},
        "actors": [
            {"actor_id": "g1", "class_name": "Learner", "state": "PENDING_CREATION"},
            {"actor_id": "w1", "class_name": "Worker", "state": "ALIVE"},
            {"actor_id": "d1", "class_name": "Worker", "state": "DEAD",
             "death_cause": "RuntimeError: CUDA error: out of memory"},
            {"actor_id": "d2", "class_name": "Worker", "state": "DEAD",
             "death_cause": "RuntimeError: CUDA error: out of memory"},
        ],
        "tasks": [
            _task("Learner.__init__", "PENDING_NODE_ASSIGNMENT", "ACTOR_CREATION_TASK", "g1",
                  created=NOW - 90_000, res={"GPU": 1.0, "CPU": 1.0}),
            _task("Worker.__init__", "FINISHED", "ACTOR_CREATION_TASK", "w1",
                  created=NOW - 95_000, started=NOW - 94_000, ended=NOW - 93_000,
                  res={"CPU": 1.0}),
            _task("Worker.run", "FINISHED", actor="w1", created=NOW - 5_000,
                  started=NOW - 5_000, ended=NOW - 1_000),
            _task("Worker.run", "RUNNING", actor="w1", created=NOW - 1_000, started=NOW - 1_000),
        ],
        "done": True,
    }
    out = ray_state.summarize(raw, pending_after=60, cpu_count=4)
    assert out["nodes"] == {"alive": 1, "dead": 1}
    assert out["resources"]["available"] == {"CPU": 0.0, "memory": 1e9}
    actors = out["actors"]
    assert actors["by_state"] == {"PENDING_CREATION": 1, "ALIVE": 1, "DEAD": 2}
    assert actors["pending_creation"] == 1 and actors["waiting_for_resources"] == 1
    assert actors["initializing"] == 0
    assert actors["oldest_pending_s"] == 90.0
    assert actors["pending_classes"] == ["Learner"]
    assert actors["death_causes"] == [{"class_name": "Worker", "count": 2,
                                       "cause": "RuntimeError: CUDA error: out of memory"}]
    assert out["actor_init_stuck"] is True
    assert out["workers_vs_cores"] == 0.5
    assert out["demands"] == {"count": 1, "resources": {"GPU": 1.0, "CPU": 1.0},
                              "infeasible": [{"GPU": 1.0, "CPU": 1.0}]}
    assert out["tasks"]["finished_recent"] == 1 and out["tasks"]["stuck_running"] == 0
    assert out["collect_stuck"] is False


def test_summary_alive_actor_whose_init_still_runs_and_unknown_ages() -> None:
    raw = {"now_ms": NOW, "node_list": [],
           "actors": [{"actor_id": "a1", "class_name": "Slow", "state": "ALIVE"}],
           "tasks": [_task("Slow.__init__", "RUNNING", "ACTOR_CREATION_TASK", "a1",
                           started=NOW - 70_000)]}
    out = ray_state.summarize(raw, pending_after=60, cpu_count=2)
    assert out["actors"]["initializing"] == 1 and out["actor_init_stuck"] is True
    assert out["collect_stuck"] is False  # a constructor is not collection

    no_tasks = {"now_ms": NOW, "node_list": [], "tasks": None,
                "actors": [{"actor_id": "a1", "class_name": "W", "state": "PENDING_CREATION"}]}
    out = ray_state.summarize(no_tasks, pending_after=60, cpu_count=2)
    assert out["actors"]["oldest_pending_s"] is None
    assert out["actor_init_stuck"] is None
    assert out.get("collect_stuck") is None and out.get("tasks") is None


def test_summary_collect_stuck_needs_old_running_work_and_nothing_finished() -> None:
    def summary(pending_after: float, extra: list[dict[str, Any]]) -> dict[str, Any]:
        raw = {"now_ms": NOW, "node_list": [],
               "actors": [{"actor_id": "a1", "class_name": "W", "state": "ALIVE"}],
               "tasks": [_task("W.run", "RUNNING", started=NOW - 30_000), *extra]}
        return ray_state.summarize(raw, pending_after=pending_after, cpu_count=2)

    assert summary(10, [])["collect_stuck"] is True
    assert summary(60, [])["collect_stuck"] is False  # not old enough yet
    recent = _task("W.run", "FINISHED", started=NOW - 9_000, ended=NOW - 2_000)
    assert summary(10, [recent])["collect_stuck"] is False  # work still completes
    old = _task("W.run", "FINISHED", started=NOW - 90_000, ended=NOW - 80_000)
    stuck = summary(10, [old])
    assert stuck["collect_stuck"] is True
    assert stuck["tasks"]["oldest_running_s"] == 30.0 and stuck["tasks"]["stuck_running"] == 1


def test_snippet_one_line_death_causes() -> None:
    namespace: dict[str, Any] = {}
    source = ray_state.SNIPPET.split("if not os.environ.get(\"RAY_AUTH_MODE\")")[0]
    exec(compile(source.replace("ADDRESS, BUDGET, LIMIT = sys.argv[1], float(sys.argv[2]), "
                                "int(sys.argv[3])", "ADDRESS, BUDGET, LIMIT = 'x', 1.0, 10"),
                 "snippet", "exec"), namespace)
    one_line = namespace["one_line"]
    assert one_line(None) is None
    trace = {"creation_task_failure_context": {"formatted_exception_string":
             "Traceback (most recent call last):\n  File \"w.py\", line 3\nImportError: no engine\n"}}
    assert one_line(trace) == "ImportError: no engine"
    died = {"actor_died_error_context": {"error_message": "The actor died unexpectedly.\nmore"}}
    assert one_line(died) == "The actor died unexpectedly."


# -- real clusters: the two Ray scenarios ---------------------------------------------------------


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                raw = (entry / "stat").read_text()
            except OSError:
                continue
            children.setdefault(int(raw[raw.rfind(")") + 2:].split()[1]), []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        current = todo.pop()
        found.add(current)
        todo += children.get(current, [])
    return found


def _live(pids: set[int]) -> set[int]:
    return {pid for pid in pids if _state(pid) not in ("gone", "Z", "X")}


def _raylets_of(address: str) -> list[int]:
    return [int(e.name) for e in Path("/proc").iterdir()
            if e.name.isdigit() and _is_raylet_of(e, address)]


def _is_raylet_of(entry: Path, address: str) -> bool:
    try:
        argv = (entry / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return bool(argv) and argv[0].endswith(b"raylet") and f"--gcs-address={address}".encode() in argv


@pytest.fixture(scope="module")
def ray_scenario(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Any]]:
    """start(name, ready_regex) -> (scenario, gcs address); all stopped (and checked) at the end."""
    from scenarios.jobs import start

    started: list[Any] = []

    def launch(name: str, ready: str) -> tuple[Any, str]:
        scenario = start(name, tmp_path_factory.mktemp(name), speed=10.0)
        started.append(scenario)
        assert scenario.wait_for_log(ready, timeout=START_TIMEOUT), scenario.read_log()[-3000:]
        address = (scenario.workdir / "ray_address").read_text().strip()
        assert address, "the job did not record its Ray address"
        return scenario, address

    yield launch
    for scenario in started:
        address_file = scenario.workdir / "ray_address"
        address = address_file.read_text().strip() if address_file.exists() else ""
        family = _descendants(scenario.pid)
        scenario.stop()
        deadline = time.monotonic() + 15
        while (_live(family) or (address and _raylets_of(address))) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _live(family), f"{scenario.name}: processes left after stop: {_live(family)}"
        assert not (address and _raylets_of(address)), f"{scenario.name}: raylet left"


def _poll(params: dict[str, Any], until: Callable[[dict[str, Any]], bool],
          timeout: float = 60.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        ctx = CheckContext(deadline=time.monotonic() + 30.0)
        result = ray_state.run(params, ctx)
        if until(result) or time.monotonic() >= deadline:
            return result
        time.sleep(1.0)


@needs_ray
@linux_only
@pytest.mark.e2e
def test_actor_init_hang_is_seen_as_actors_stuck_initialising(ray_scenario) -> None:
    scenario, address = ray_scenario("ray_actor_init_hang", r"Collecting trajectories\.\.\.")
    started = time.monotonic()
    result = _poll({"address": address, "pending_after": 2},
                   lambda r: r["actor_init_stuck"] is True and r["actors"]["initializing"] == 8)
    print(f"ray check on ray_actor_init_hang: {time.monotonic() - started:.1f}s to a verdict")
    assert result["available"] is True and result["running"] is True, result["reason"]
    assert result["timed_out"] is False and result["reason"] is None
    assert result["address"] == address
    assert result["actor_init_stuck"] is True
    assert result["collect_stuck"] is False
    actors = result["actors"]
    assert actors["pending_creation"] == 8 and actors["alive"] == 0
    assert actors["initializing"] == 8  # blocked inside __init__, not waiting for resources
    assert actors["waiting_for_resources"] == 0
    assert actors["pending_classes"] == ["SelfPlayWorker"]
    assert actors["oldest_pending_s"] > 2
    tasks = result["tasks"]
    assert tasks["by_state"].get("RUNNING") == 8  # the __init__ calls
    assert tasks["by_state"].get("PENDING_NODE_ASSIGNMENT") == 8  # run() waits for its actor
    assert result["source"] == "gcs"  # no dashboard in this scenario: read from the GCS
    assert result["nodes"] == {"alive": 1, "dead": 0}
    assert result["resources"]["total"]["CPU"] == 4.0
    assert result["resources"]["available"]["CPU"] == 0.0  # 8 x 0.5 CPU held by the actors
    assert result["workers_vs_cores"] == round(8 / (os.cpu_count() or 1), 2)
    assert "initializing engine (scai_engine.PyGameEngine)" in scenario.read_log()

    # The same through the real probe, discovering the cluster itself (no address given).
    answer = probe({"check": "ray", "with": {"pending_after": 2}, "timeout": 30})
    assert "error" not in answer, answer.get("traceback")
    assert address in answer["result"]["addresses_found"]


@needs_ray
@linux_only
@pytest.mark.e2e
def test_collect_hang_is_seen_as_collection_stuck(ray_scenario) -> None:
    scenario, address = ray_scenario("ray_collect_hang", r"Waiting for 8 workers\.\.\.")
    assert "Created 8/8 workers..." in scenario.read_log()
    started = time.monotonic()
    # Until every ready() call has run past pending_after: under load they start seconds apart.
    result = _poll({"address": address, "pending_after": 2},
                   lambda r: r["collect_stuck"] is True and r["source"] == "state_api"
                   and r["tasks"]["stuck_running"] == 8)
    print(f"ray check on ray_collect_hang: {time.monotonic() - started:.1f}s to a verdict")
    assert result["running"] is True and result["reason"] is None, result
    assert result["collect_stuck"] is True
    assert result["actor_init_stuck"] is False
    assert result["source"] == "state_api"  # this scenario runs the dashboard
    assert result["actors"]["by_state"] == {"ALIVE": 8}
    tasks = result["tasks"]
    assert tasks["running"] >= 1 and tasks["by_state"]["RUNNING"] == 8
    assert tasks["stuck_running"] == 8 and tasks["finished_recent"] == 0
    assert tasks["oldest_running_s"] > 2
    assert tasks["finished"] == 16  # 8 constructors + 8 ready() calls
    assert result["demands"]["count"] == 0
