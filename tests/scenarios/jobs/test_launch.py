"""The scenario jobs really are in the state they claim, and the launcher cleans up after them.

Every test starts real processes; every wait is bounded; every job is killed at
teardown by the `launch` fixture (conftest.py), even when an assertion fails.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from runbook.checks._procfs import environ
from scenarios.jobs import (
    SCENARIO_ROOT,
    SCENARIOS,
    Scenario,
    ScenarioError,
    group_members,
    load,
    start,
)
from tests.daemon_fixture import group_gone

REPO = Path(__file__).resolve().parents[3]
SEEDS = REPO.parent / "shared" / "seeds"
Launcher = Callable[..., Scenario]

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="reads /proc; scenarios target Linux nodes")

PROGRESS = re.compile(r"\[DataLoader\] 进度: (\d+) 个文档批次, Token buffer: (\d+)/65537 \((\d+)%\)")
FIRST_BATCH = re.compile(
    r"\[DataLoader\] ✓ 第一个训练批次已准备好: inputs\.shape=torch\.Size\(\[32, 2048\]\), "
    r"targets\.shape=torch\.Size\(\[32, 2048\]\)")
LOADER_STEP = re.compile(r"^step (\d+) \| loss (\d+\.\d{4}) \| tokens/s (\d+)$", re.M)
HEALTHY_STEP = re.compile(r"^step (\d+) \| loss (\d+\.\d{4}) \| lr (\d+\.\d+)$", re.M)
COLLECTING = "Collecting trajectories..."


# ---------------------------------------------------------------------- helpers


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, in seconds."""
    raw = Path(f"/proc/{pid}/stat").read_text()
    fields = raw[raw.rfind(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_share(pid: int, interval: float = 1.0) -> float:
    """Fraction of one core the process used over `interval` seconds."""
    c0, t0 = cpu_seconds(pid), time.monotonic()
    time.sleep(interval)
    return (cpu_seconds(pid) - c0) / (time.monotonic() - t0)


def runnable_share(pid: int, interval: float = 1.0, samples: int = 40) -> float:
    """Fraction of samples in state R: wants a CPU, even when a loaded machine gives it none."""
    states = []
    for _ in range(samples):
        states.append(state(pid))
        time.sleep(interval / samples)
    return states.count("R") / samples


def state(pid: int) -> str:
    raw = Path(f"/proc/{pid}/stat").read_text()
    return raw[raw.rfind(")") + 2:].split()[0]


def cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def assert_stops(sc: Scenario) -> None:
    assert sc.stop(), "stop() left live processes in the group"
    with pytest.raises(ProcessLookupError):
        os.killpg(sc.pgid, 0)
    assert not sc.is_alive()


def assert_looks_like_training(sc: Scenario) -> None:
    argv = cmdline(sc.pid)
    assert "python3" in Path(argv[0]).name
    assert argv[1].endswith("/train.py") and "train" in " ".join(argv)
    env = environ(sc.pid)
    assert env["RANK"] == "0" and env["LOCAL_RANK"] == "0" and env["WORLD_SIZE"] == "1"
    assert env["MASTER_ADDR"] == "127.0.0.1" and int(env["MASTER_PORT"]) > 0
    assert env["PYTHONUNBUFFERED"] == "1"
    assert os.getpgid(sc.pid) == sc.pid == sc.pgid  # its own session / group
    assert os.getsid(sc.pid) == sc.pid
    assert Path(os.readlink(f"/proc/{sc.pid}/fd/1")) == sc.log
    assert Path(os.readlink(f"/proc/{sc.pid}/cwd")) == sc.workdir


# ---------------------------------------------------------------------- registry


def test_registry_is_complete_and_names_known_taxonomy_ids() -> None:
    taxonomy = yaml.safe_load((REPO / "engine/runbook/data/taxonomy.yaml").read_text())
    known = {tid for group in taxonomy.values() for tid in group}
    assert set(SCENARIOS) >= {"loader_accumulating", "nvidia_smi_hang", "healthy"}
    for name, spec in SCENARIOS.items():
        assert spec.name == name
        assert (SCENARIO_ROOT / spec.script).is_file()
        assert spec.description["en"] and spec.description["zh"]
        assert spec.taxonomy is None or spec.taxonomy in known, spec.taxonomy
        assert all(t in known for t in spec.related)
        if spec.seed and SEEDS.is_dir():
            assert (SEEDS / spec.seed).is_file(), spec.seed
    assert SCENARIOS["loader_accumulating"].taxonomy == "hang.dataloader"
    assert SCENARIOS["nvidia_smi_hang"].taxonomy == "hang.gpu-driver"
    assert SCENARIOS["healthy"].taxonomy is None and SCENARIOS["healthy"].severity == "ok"


def test_registry_conclusions_are_conclusions_of_the_expected_taxonomy() -> None:
    """`conclusion` ("runbook:conclusion") names a conclusion of a shipped runbook, and that
    conclusion carries the scenario's taxonomy id (none for a healthy one)."""
    labelled = {name: spec for name, spec in SCENARIOS.items() if spec.conclusion is not None}
    assert {"gloo_lone_rank", "eight_ranks_two_missing", "oom_other_process", "cuda_oom"} <= set(labelled)
    for name, spec in labelled.items():
        runbook_id, _, conclusion_id = str(spec.conclusion).partition(":")
        runbook = yaml.safe_load((REPO / "runbooks" / f"{runbook_id}.yaml").read_text())
        assert conclusion_id in runbook["conclusions"], (name, spec.conclusion)
        taxonomy = runbook["conclusions"][conclusion_id].get("taxonomy") or []
        assert (spec.taxonomy in taxonomy) if spec.taxonomy else not taxonomy, (name, taxonomy)
        if spec.bystander is not None:
            assert (SCENARIO_ROOT / spec.bystander).is_file(), spec.bystander


def test_scenario_scripts_are_standard_library_only() -> None:
    allowed = set(sys.stdlib_module_names) | {"__future__"}
    requires = {SCENARIO_ROOT / s.script: set(s.requires) for s in SCENARIOS.values()}
    files = list(requires)
    files += [SCENARIO_ROOT / name for name in ("__init__.py", "launch.py", "registry.py", "_helpers.py")]
    files += [REPO / "scenarios" / "__init__.py", REPO / "scenarios" / "__main__.py"]
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                assert top in allowed | {"scenarios", "_helpers"} | requires.get(path, set()), \
                    f"{path}: imports {name}"


def test_unknown_scenario_and_bad_speed_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError):
        start("no_such_scenario", tmp_path)
    with pytest.raises(ScenarioError):
        start("healthy", tmp_path, speed=0)


# ---------------------------------------------------------------------- loader_accumulating


def test_loader_accumulating_burns_cpu_and_reports_progress(launch: Launcher) -> None:
    sc = launch("loader_accumulating", speed=1.0)
    assert sc.is_alive()
    assert sc.path_prepend is None and sc.env == {}
    assert sc.wait_for_log(PROGRESS.pattern, timeout=5.0), sc.read_log()
    assert_looks_like_training(sc)
    # Really working: more than half a core while it accumulates.
    share = cpu_share(sc.pid, 1.0)
    # Busy, not asleep: it used most of a core, or (on a loaded machine) it was always runnable.
    assert share > 0.5 or runnable_share(sc.pid) > 0.8, f"loader used {share:.0%} of a core"
    # Progress lines keep coming (at least one every 2 s) and the buffer grows.
    before = PROGRESS.findall(sc.read_log())
    assert wait_until(lambda: len(PROGRESS.findall(sc.read_log())) >= len(before) + 2, 4.5)
    # The buffer grows (on a loaded machine the first lines may all say 0: bounded wait).
    grown = lambda: int(PROGRESS.findall(sc.read_log())[-1][1]) > int(before[0][1])  # noqa: E731
    assert wait_until(grown, 30.0), sc.read_log()[-2000:]
    after = PROGRESS.findall(sc.read_log())
    assert int(after[-1][1]) < 65537
    log = sc.read_log()
    for line in ("[DataLoader] 开始加载数据 (rank=0, world_size=1)",
                 "[DataLoader] 找到 10 个 parquet 文件", "代替 parquet"):
        assert line in log
    assert not FIRST_BATCH.search(log) and not LOADER_STEP.search(log)
    shards = sorted((sc.workdir / "data/parquet_shards").glob("shard_*.jsonl"))
    assert [p.name for p in shards] == [f"shard_{i:05d}.jsonl" for i in range(10)]
    assert_stops(sc)


def test_loader_accumulating_yields_first_batch_then_trains(launch: Launcher) -> None:
    sc = launch("loader_accumulating", speed=60.0)
    assert sc.wait_for_log(FIRST_BATCH.pattern, timeout=20.0), sc.read_log()[-2000:]
    assert sc.wait_for_log(r"(?m)^step \d+ .*\n(?:.*\n)*step \d+ ", timeout=5.0)
    log = sc.read_log()
    assert log.index("Token buffer:") < FIRST_BATCH.search(log).start()  # type: ignore[union-attr]
    assert FIRST_BATCH.search(log).end() < LOADER_STEP.search(log).start()  # type: ignore[union-attr]
    progress = PROGRESS.findall(log)
    assert progress and int(progress[-1][1]) >= 65537
    steps = LOADER_STEP.findall(log)
    assert len(steps) >= 2 and int(steps[1][0]) > int(steps[0][0])
    assert sc.is_alive()
    assert_stops(sc)


# ---------------------------------------------------------------------- nvidia_smi_hang


def test_nvidia_smi_hang_job_stops_logging_and_sleeps(launch: Launcher) -> None:
    sc = launch("nvidia_smi_hang")
    assert sc.wait_for_log(re.escape(COLLECTING), timeout=10.0), sc.read_log()
    assert_looks_like_training(sc)
    log = sc.read_log()
    assert "Initializing 100 workers..." in log
    assert log.rstrip().endswith(COLLECTING)
    # The log stops moving.
    size = sc.log.stat().st_size
    time.sleep(3.0)
    assert sc.log.stat().st_size == size
    assert sc.is_alive()
    # Main process and its workers: alive, asleep, no CPU.
    members = [p for p in group_members(sc.pgid) if p != sc.pid]
    assert len(members) >= 4
    assert state(sc.pid) == "S"
    assert all(state(p) == "S" for p in members)
    assert cpu_share(sc.pid, 1.0) < 0.2
    assert_stops(sc)


def test_fake_nvidia_smi_hangs_ignores_sigterm_and_dies_on_sigkill(launch: Launcher) -> None:
    sc = launch("nvidia_smi_hang")
    assert sc.path_prepend is not None
    tool = Path(sc.path_prepend) / "nvidia-smi"
    assert os.access(tool, os.X_OK)
    env = sc.tool_env()
    assert env["PATH"].split(os.pathsep)[0] == sc.path_prepend == sc.env["PATH"].split(":")[0]
    assert shutil.which("nvidia-smi", path=env["PATH"]) == str(tool)
    proc = subprocess.Popen(["nvidia-smi", "--query-gpu=name", "--format=csv"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            proc.communicate(timeout=2)
        os.killpg(proc.pid, signal.SIGTERM)  # a stuck driver call shrugs this off
        time.sleep(0.5)
        assert proc.poll() is None
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=5)
    assert proc.returncode == -signal.SIGKILL
    assert group_gone(proc.pid)
    assert_stops(sc)


def test_fake_nvidia_smi_in_the_repo_is_executable() -> None:
    tool = SCENARIO_ROOT / "nvidia_smi_hang/bin/nvidia-smi"
    assert tool.read_text().startswith("#!/bin/sh\n")
    assert "trap '' TERM" in tool.read_text()
    assert os.access(tool, os.X_OK)


# ---------------------------------------------------------------------- healthy


def test_healthy_trains_with_falling_loss(launch: Launcher) -> None:
    sc = launch("healthy")
    assert sc.wait_for_log(r"(?m)^step \d+ .*\n(?:.*\n)*step \d+ .*\n(?:.*\n)*step \d+ ", 8.0)
    assert_looks_like_training(sc)
    steps = HEALTHY_STEP.findall(sc.read_log())
    assert len(steps) >= 3
    numbers = [int(s[0]) for s in steps]
    losses = [float(s[1]) for s in steps]
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)
    assert all(b < a for a, b in zip(losses, losses[1:], strict=False)), losses
    # Lines keep coming, at least one a second.
    count = len(steps)
    assert wait_until(lambda: len(HEALTHY_STEP.findall(sc.read_log())) >= count + 2, 2.5)
    assert_stops(sc)


def test_env_overrides_reach_the_job(launch: Launcher) -> None:
    sc = launch("healthy", env={"RANK": "3", "WORLD_SIZE": "4", "MASTER_ADDR": "10.0.0.1"})
    assert sc.wait_for_log(r"rank=3, world_size=4", 5.0), sc.read_log()
    env = environ(sc.pid)
    assert (env["RANK"], env["WORLD_SIZE"], env["MASTER_ADDR"]) == ("3", "4", "10.0.0.1")
    assert env["LOCAL_RANK"] == "0"
    assert_stops(sc)


# ---------------------------------------------------------------------- launcher


def test_state_file_round_trip_and_wait_for_log_is_bounded(launch: Launcher) -> None:
    sc = launch("healthy")
    data = json.loads((sc.workdir / "scenario.json").read_text())
    for key in ("name", "pid", "log", "workdir", "path_prepend", "env"):
        assert key in data
    again = load(sc.workdir)
    assert (again.name, again.pid, again.log, again.workdir) == (sc.name, sc.pid, sc.log,
                                                                  sc.workdir)
    t0 = time.monotonic()
    assert not sc.wait_for_log("this line never appears", timeout=0.5)
    assert time.monotonic() - t0 < 10.0  # bounded (generous: the machine may be loaded)
    with pytest.raises(ScenarioError, match="already runs"):
        start("healthy", sc.workdir)
    # The first run must have written to the log before it stops (a loaded machine may not have
    # let it print yet), so the second run's offset is past it.
    assert sc.wait_for_log(r"step 0 \|", 30.0), sc.read_log()
    assert_stops(sc)
    # A stopped scenario can be started again in the same directory; the new handle only
    # sees its own part of the (appended) log.
    sc2 = start("healthy", sc.workdir)
    try:
        assert sc2.log_offset > 0
        assert sc2.wait_for_log(r"step 0 \|", 5.0)
        assert sc2.read_log().count("step 0 |") == 1
    finally:
        assert_stops(sc2)


def test_cli_start_status_stop_from_other_processes(tmp_path: Path) -> None:
    workdir = tmp_path / "cli"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "scenarios", *args], cwd=REPO,
                              capture_output=True, text=True, timeout=30)

    listed = cli("list", "--json")
    assert listed.returncode == 0 and set(json.loads(listed.stdout)) == set(SCENARIOS)
    started = cli("start", "nvidia_smi_hang", "--dir", str(workdir), "--speed", "2")
    assert started.returncode == 0, started.stderr
    info = json.loads(started.stdout)
    pgid = info["pgid"]
    try:
        assert info["name"] == "nvidia_smi_hang" and info["speed"] == 2.0
        assert info["path_prepend"] == str(workdir / "bin")
        assert info["env"]["PATH"].startswith(str(workdir / "bin") + os.pathsep)
        assert load(workdir).wait_for_log(re.escape(COLLECTING), 10.0)
        status = cli("status", "--dir", str(workdir))
        assert json.loads(status.stdout)["alive"] is True
        stopped = cli("stop", "--dir", str(workdir))
        assert stopped.returncode == 0, stopped.stderr
        assert json.loads(stopped.stdout)["stopped"] is True
        assert group_gone(pgid)
    finally:
        load(workdir).stop()
    assert cli("stop", "--dir", str(tmp_path / "nothing")).returncode == 1
