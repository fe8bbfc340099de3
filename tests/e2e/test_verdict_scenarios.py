"""Issue #24, "verdicts as specific as the evidence": three real faulty jobs, end to end.

- `gloo_lone_rank`: rank 0 of a 2-rank gloo job started alone on node01 of the SSH test cluster
  waits in init_process_group for rank 1, which is never started.
- `eight_ranks_two_missing`: ranks 0-5 of an 8-rank job on node01-node06 prepare their data
  shards (their logs move) while ranks 6 and 7 are missing (node07 runs nothing, node08 is down);
  rank 3's DataLoader worker sleeps in open() on a FIFO, so node04's log stops.
- `oom_other_process` (this machine, no cluster): a job that fits the GPU dies of CUDA OOM because
  a stale notebook (python3 -c "import torch ...", a session of its own) holds 70 GiB of it.

Each class starts its scenario once (a class-scoped fixture that stops everything it started, and
checks that nothing is left), asserts the real state the scenario claims (stacks by py-spy through
`runbook check stack`, /proc, the logs), then runs `runbook run ... --format json` and asserts the
verdict an experienced engineer gives (`test_*_diagnosed_*`), with the facts in its finding.

Recording the incidents (by hand; the test commits nothing):

    RUNBOOK_RECORD_VERDICTS=runbooks/recordings \
        .venv/bin/pytest tests/e2e/test_verdict_scenarios.py -k diagnosed

writes runbooks/recordings/<scenario>/incident.json for every diagnosis run below (gloo_lone_rank,
eight_ranks_two_missing, oom_other_process; oom_other_process-training-hang for the training-hang
run of that job); any other folder works too (relative to the repository root, or absolute).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from scenarios.clusters.net import free_port
from scenarios.clusters.ssh import SYSTEM_PATH, Cluster
from scenarios.jobs import SCENARIO_ROOT, SCENARIOS, Scenario, start
from tests import cluster_fixture
from tests.daemon_fixture import Factory, factory_fixture

pytestmark = pytest.mark.e2e
pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
RECORD_ENV = "RUNBOOK_RECORD_VERDICTS"
SPEED = 2.0
STALL_AFTER_S = 3.0  # stall_after (and loader_stall_after) given to training-hang
START_TIMEOUT_S = 180.0  # torch imported by several ranks at once on a busy 2-core machine
RUNBOOK_TIMEOUT_S = 300.0
POLL_S = 0.2


# -- helpers --------------------------------------------------------------------------------------


def wait_until(predicate: Callable[[], object], timeout: float, what: Callable[[], str]) -> None:
    """Poll `predicate` every POLL_S seconds for at most `timeout` seconds; fail with `what()`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(POLL_S)
    if not predicate():
        raise AssertionError(f"not within {timeout:g}s: {what()}")


def record_args(folder: str) -> list[str]:
    """`--record BASE/FOLDER` when RUNBOOK_RECORD_VERDICTS=BASE (relative to the repository
    root, e.g. runbooks/recordings; see the module docstring); nothing otherwise."""
    base = os.environ.get(RECORD_ENV)
    return ["--record", str(ROOT / base / folder)] if base else []


def runbook(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m runbook ARGS` in English, bounded."""
    return subprocess.run([sys.executable, "-m", "runbook", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {}), "RUNBOOK_LANG": "en"},
                          timeout=RUNBOOK_TIMEOUT_S, cwd=ROOT)


def report_of(out: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert out.stdout, out.stderr[-3000:]
    report: dict[str, Any] = json.loads(out.stdout)
    return report


def by_node(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n["node"]: n for n in report["nodes"]}


def conclusion(node: dict[str, Any]) -> str | None:
    return (node.get("conclusion") or {}).get("id")


def evidence(node: dict[str, Any], step: str) -> dict[str, Any]:
    """The result of `step` on a node (the first time the walk stood on it)."""
    for entry in node["evidence"]:
        if entry["step"] == step:
            result: dict[str, Any] = entry["result"]
            return result
    raise AssertionError(f"no step {step}: {[e['step'] for e in node['evidence']]}")


def walked(node: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(step, goto, decided_by) of a node's walk: what a failed assertion shows."""
    return [(e["step"], e["goto"], e["decided_by"]) for e in node["evidence"]]


def stat_state(pid: int) -> str:
    raw = Path(f"/proc/{pid}/stat").read_text()
    return raw[raw.rfind(")") + 2:].split()[0]


def sleeps(pid: int, samples: int = 40, every_s: float = 0.05) -> bool:
    """True when `pid` is seen asleep in one of `samples` reads of its state.

    A waiting rank wakes now and then (the store polls), so one read can catch it running; a
    process that spins is never seen asleep.
    """
    for _ in range(samples):
        if stat_state(pid) == "S":
            return True
        time.sleep(every_s)
    return False


def environ(pid: int) -> dict[str, str]:
    items = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace").split("\0")
    return dict(item.split("=", 1) for item in items if "=" in item)


def listening_ports(pid: int) -> set[int]:
    """Ports on which `pid` holds a listening TCP socket (IPv4 or IPv6), read from /proc."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            cols = line.split()
            if cols[3] == "0A" and cols[9] in inodes:  # 0A: LISTEN
                ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return ports


def line_of(script: Path, text: str) -> int:
    """The line number of the first line of `script` that contains `text`."""
    for number, line in enumerate(script.read_text().splitlines(), start=1):
        if text in line:
            return number
    raise AssertionError(f"{text!r} not in {script}")


def assert_fixes_leave_alone(report: dict[str, Any], pid: int) -> None:
    """No fix command carries `pid` unless its purpose is to end that process."""
    for node in report["nodes"]:
        for fix in (node.get("conclusion") or {}).get("fixes") or []:
            if re.search(rf"\b{pid}\b", fix.get("run") or ""):
                ends = re.search(r"\b(?:end|kill|stop)\b", fix.get("title") or "", re.I)
                assert ends and "kill" in fix["run"] and fix["effect"] == "disruptive", fix


# -- jobs with one rank per host --------------------------------------------------------------------


class RankPerHost:
    """A scenario's ranks on the SSH test cluster, rank R on node0{R+1}.

    As in tests/e2e/test_cross_rank.py, every host sees the same job directory path (JOB_DIR),
    bind-mounted inside the host's own mount namespace onto its private folder BASE/jobs/nodeNN:
    one `--set log=JOB_DIR/train.log` serves every host, and each host's log is its own.
    """

    def __init__(self, cl: Cluster, base: Path, name: str, world: int) -> None:
        self.cl, self.name, self.world = cl, name, world
        self.script = SCENARIOS[name].script
        self.job_dir = base / "job"
        self.job_dir.mkdir(parents=True, exist_ok=True)
        self.private = {host: base / "jobs" / host for host in cl.names()}
        for host, folder in self.private.items():
            folder.mkdir(parents=True, exist_ok=True)
            res = cl.run_in(host, ["mount", "--bind", str(folder), str(self.job_dir)],
                            env={"PATH": SYSTEM_PATH})
            assert res.returncode == 0, f"{host}: bind mount failed: {res.stderr}"
        self.master = cl.host("node01").address
        self.port = free_port([h.address for h in cl.hosts] + ["127.0.0.1"])
        self.started: list[str] = []

    @staticmethod
    def host_of(rank: int) -> str:
        return f"node{rank + 1:02d}"

    @property
    def log_param(self) -> str:
        return str(self.job_dir / "train.log")

    def read(self, host: str) -> str:
        try:
            return (self.private[host] / "train.log").read_text(errors="replace")
        except OSError:
            return ""

    def log_size(self, host: str) -> int:
        try:
            return (self.private[host] / "train.log").stat().st_size
        except OSError:
            return 0

    def start(self, rank: int) -> None:
        """Start rank `rank` on its host with the environment a multi-node launcher gives it."""
        env = {"RANK": str(rank), "LOCAL_RANK": "0", "GROUP_RANK": str(rank),
               "WORLD_SIZE": str(self.world), "LOCAL_WORLD_SIZE": "1",
               "MASTER_ADDR": self.master, "MASTER_PORT": str(self.port)}
        self.started.append(self.host_of(rank))
        self.cl.start_scenario(self.host_of(rank), self.name, str(self.job_dir), speed=SPEED, env=env)

    def wait_for(self, host: str, pattern: str, timeout: float = START_TIMEOUT_S) -> None:
        regex = re.compile(pattern, re.M)
        wait_until(lambda: regex.search(self.read(host)), timeout,
                   lambda: f"{host}: /{pattern}/ not in its log:\n{self.read(host)[-2000:]}")

    def wait_quiet(self, host: str, quiet_s: float, timeout: float = 60.0) -> None:
        """Wait (bounded) until `host`'s log has not grown for `quiet_s` seconds."""
        wait_until(lambda: time.time() - (self.private[host] / "train.log").stat().st_mtime >= quiet_s,
                   timeout, lambda: f"{host}'s log kept moving:\n{self.read(host)[-1000:]}")

    def processes(self, host: str) -> list[tuple[int, int, str]]:
        """(pid here, pid on the host, command line) of the scenario's processes on a host."""
        return [row for row in self.cl.process_table(host) if self.script in row[2]]

    def check_stack(self, host: str) -> dict[str, Any]:
        """`runbook check stack` on one host (py-spy there): the result."""
        out = runbook("check", "stack", "--nodes", host, "--with", f"match={self.script}",
                      "--format", "json", env=self.cl.env())
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
        node = json.loads(out.stdout)["nodes"][0]
        assert node["status"] == "ok", node
        result: dict[str, Any] = node["result"]
        return result

    def diagnose(self, nodes: list[str], record: str) -> subprocess.CompletedProcess[str]:
        stall = f"{STALL_AFTER_S:g}"
        return runbook("run", "training-hang", "--nodes", ",".join(nodes), "--set", f"log={self.log_param}",
                       "--set", f"stall_after={stall}", "--set", f"loader_stall_after={stall}",
                       "--connect-timeout", "6", "--format", "json", *record_args(record),
                       env=self.cl.env())

    def stop(self) -> None:
        """`python3 -m scenarios stop` on every host that runs a rank (all of them, whatever
        fails); nothing may be left. The cluster's own teardown kills whatever a host still runs."""
        failed = {}
        for host in self.started:
            if self.cl.host(host).is_alive():
                res = self.cl.stop_scenario(host, str(self.job_dir))
                if res.returncode != 0:
                    failed[host] = res.stderr.strip()
        left = {host: self.processes(host) for host in self.started if self.processes(host)}
        self.started.clear()
        assert not failed and not left, f"stop failed: {failed}; still running: {left}"


def _clusters(tmp_path_factory: pytest.TempPathFactory) -> Factory[Cluster]:
    return Factory(Cluster.start, cluster_fixture.SSH, tmp_path_factory, "cluster", base_arg="base",
                   defaults={"port": None, "python_dir": str(Path(sys.executable).parent)})


# One factory per test class: a class's cluster lives as long as its tests, and is stopped after.
class_clusters = factory_fixture("class_clusters", _clusters, scope="class",
                                 doc="class_clusters(n) -> an SSH test cluster whose python3 has torch.")


def ranks_on_cluster(make: Callable[..., Cluster], base: Path, name: str, hosts: int,
                     world: int) -> RankPerHost:
    return RankPerHost(make(hosts), base, name, world)


# -- gloo_lone_rank -------------------------------------------------------------------------------


@pytest.fixture(scope="class")
def lone_rank(class_clusters, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RankPerHost]:
    """Rank 0 of 2 alone on node01 (node02 runs nothing), waiting in the rendezvous."""
    job = ranks_on_cluster(class_clusters, tmp_path_factory.mktemp("lone"), "gloo_lone_rank", 2, 2)
    try:
        job.start(0)
        job.wait_for("node01", r"^rank 0/2 init_process_group\(backend=gloo")
        job.wait_quiet("node01", STALL_AFTER_S + 1.0)
        yield job
    finally:
        job.stop()


class TestLoneRank:
    def test_rank0_waits_alone_in_init_process_group(self, lone_rank: RankPerHost) -> None:
        job = lone_rank
        log = job.read("node01")
        assert f"MASTER_ADDR={job.master} MASTER_PORT={job.port}, host node01" in log, log
        assert "initialised process group" not in log, log
        assert not job.processes("node02")  # rank 1 was never started
        (here, _, _), = job.processes("node01")
        assert sleeps(here)  # waiting for its peer, not spinning
        assert job.port in listening_ports(here)  # rank 0 holds the store on MASTER_PORT
        env = environ(here)
        assert (env["RANK"], env["WORLD_SIZE"], env["MASTER_ADDR"]) == ("0", "2", job.master)
        stack = job.check_stack("node01")
        (process,) = stack["processes"]
        assert (process["rank"], process["role"]) == (0, "rank"), process
        main = next(t for t in process["threads"] if t["name"] == "MainThread")
        assert any(f.endswith(" init_process_group") for f in main["frames"]), main["frames"]
        assert "_create_c10d_store" in main["innermost"] or "TCPStore" in main["innermost"], main

    def test_lone_rank_diagnosed_as_waiting_in_rendezvous(self, lone_rank: RankPerHost) -> None:
        job = lone_rank
        out = job.diagnose(["node01"], "gloo_lone_rank")
        report = report_of(out)
        node = by_node(report)["node01"]
        assert conclusion(node) == "waiting-in-rendezvous", walked(node)
        assert out.returncode == 1
        finding = node.get("finding") or ""
        for words in ("rank 0", "WORLD_SIZE=2", "ranks found: 0", f"{job.master}:{job.port}"):
            assert words in finding, (words, finding)


# -- eight_ranks_two_missing ----------------------------------------------------------------------

EIGHT = [f"node{i:02d}" for i in range(1, 9)]
MOVING = ["node01", "node02", "node03", "node05", "node06"]  # ranks 0, 1, 2, 4, 5
STALLED = "node04"  # rank 3
STALLED_CONCLUSION = "dataloader-worker-stuck"  # node04: its main thread waits on the DataLoader
PROGRESS = r"^rank {rank}/8 \| preparing data shard {rank} \| step \d+ \| documents \d+ \|"


@pytest.fixture(scope="class")
def eight_ranks(class_clusters, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RankPerHost]:
    """Ranks 0-5 on node01-node06; node07 runs nothing; node08 is down; node04's loader stalled."""
    job = ranks_on_cluster(class_clusters, tmp_path_factory.mktemp("eight"), "eight_ranks_two_missing",
                           8, 8)
    try:
        for rank in range(6):
            job.start(rank)
        assert job.cl.kill_sshd("node08"), "node08 did not go down"
        for rank in range(6):
            job.wait_for(job.host_of(rank), PROGRESS.format(rank=rank))
        job.wait_for(STALLED, r"^rank 3/8 \| preparing data shard 3 \| step 3 \| documents 16 \|")
        job.wait_quiet(STALLED, STALL_AFTER_S + 1.0)
        yield job
    finally:
        job.stop()


class TestEightRanksTwoMissing:
    def test_five_logs_move_and_node04_waits_in_its_data_loader(self, eight_ranks: RankPerHost) -> None:
        job = eight_ranks
        assert not job.processes("node07")
        assert not job.cl.host("node08").is_alive()
        before = {host: job.log_size(host) for host in [*MOVING, STALLED]}
        time.sleep(STALL_AFTER_S)
        grew = {host: job.log_size(host) > size for host, size in before.items()}
        assert grew == {**dict.fromkeys(MOVING, True), STALLED: False}, grew
        assert job.read(STALLED).rstrip("\n").splitlines()[-1].startswith("rank 3/8 | preparing data "
                                                                           "shard 3 | step 3 |")
        self._assert_stalled_loader(job)

    @staticmethod
    def _assert_stalled_loader(job: RankPerHost) -> None:
        """node04: the rank's main thread waits in the DataLoader; its worker sleeps in open() on
        the FIFO (part 2 of shard 3), with nobody writing it."""
        stack = job.check_stack(STALLED)
        roles = {p["role"]: p for p in stack["processes"]}
        assert set(roles) == {"rank", "worker"}, stack["processes"]
        rank, worker = roles["rank"], roles["worker"]
        assert rank["rank"] == 3 and rank["main_wait"] == "dataloader", rank
        assert rank["main_op"] in ("_next_data", "_get_data", "_try_get_data"), rank
        script = SCENARIO_ROOT / job.script
        opens = f"{script}:{line_of(script, 'with open(part) as fh:')} "
        assert (worker["main_user_frame"] or "").startswith(opens), (opens, worker)
        here = next(pid for pid, inner, _ in job.processes(STALLED) if inner == worker["pid"])
        assert stat_state(here) == "S"
        assert Path(f"/proc/{here}/wchan").read_text().strip() == "wait_for_partner"
        fifo = job.private[STALLED] / "data" / "shard_03" / "part-00002.txt"
        assert fifo.is_fifo()

    def test_eight_ranks_diagnosed_node_by_node(self, eight_ranks: RankPerHost) -> None:
        out = eight_ranks.diagnose(EIGHT, "eight_ranks_two_missing")
        report = report_of(out)
        nodes = by_node(report)
        for host in MOVING:
            assert conclusion(nodes[host]) == "healthy", (host, walked(nodes[host]))
        assert conclusion(nodes[STALLED]) == STALLED_CONCLUSION, walked(nodes[STALLED])
        assert conclusion(nodes["node07"]) == "rank-missing-here", walked(nodes["node07"])
        assert nodes["node08"]["status"] == "unreachable", nodes["node08"]
        missing = [j for j in report["summary"].get("job") or [] if j.get("analysis") == "rank-map"]
        assert missing and missing[0]["problem"] and missing[0]["ranks"] == [6, 7], missing
        assert out.returncode == report["summary"]["exit_code"] == 1


# -- oom_other_process ----------------------------------------------------------------------------

OOM_LINE = (r"torch\.OutOfMemoryError: CUDA out of memory\. Tried to allocate [0-9.]+ MiB\. GPU 0 has a "
            r"total capacity of 79\.11 GiB of which [0-9.]+ MiB is free\. Process {pid} has 70\.00 GiB "
            r"memory in use\. Including non-PyTorch memory, this process has [0-9.]+ GiB memory in "
            r"use\. Of the allocated memory ")


@pytest.fixture(scope="class")
def oom_other(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    """The job has died of its OOM; the stale notebook still runs."""
    job = start("oom_other_process", tmp_path_factory.mktemp("oom") / "job", speed=4.0)
    try:
        wait_until(lambda: not job.is_alive(), START_TIMEOUT_S, lambda: job.read_log()[-2000:])
        yield job
    finally:
        assert job.stop(), "processes of the scenario are left"
        assert not job.is_alive() and not job.bystander_alive()


class TestOomOtherProcess:
    def test_job_died_of_oom_naming_the_notebook_which_runs_on(self, oom_other: Scenario) -> None:
        job, stale = oom_other, oom_other.bystander_pid
        assert job._proc is not None and job._proc.wait(timeout=10) == 1
        last = job.read_log().rstrip("\n").splitlines()[-1]
        assert re.match(OOM_LINE.format(pid=stale), last), last
        assert "[notebook]" not in job.read_log()
        assert stale is not None and job.bystander_alive() and stat_state(stale) == "S"
        assert os.getsid(stale) == os.getpgid(stale) == stale != job.pgid  # its own session
        assert int(Path(f"/proc/{stale}/stat").read_text().rsplit(")", 1)[1].split()[1]) != job.pid
        assert not {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"} & set(environ(stale))
        assert b"libtorch" in Path(f"/proc/{stale}/maps").read_bytes()  # it imported torch
        argv = Path(f"/proc/{stale}/cmdline").read_bytes().split(b"\0")
        assert argv[1] == b"-c" and b"import torch" in argv[2], argv
        assert f"pid {stale}:" in (job.workdir / "bystander.log").read_text()

    def test_the_same_job_fits_an_empty_gpu(self, tmp_path: Path) -> None:
        """The control: without the notebook, the job's configuration (batch 4) trains."""
        alone = start("cuda_oom", tmp_path / "alone", speed=4.0, extra_args=["--batch-size", "4"])
        try:
            assert alone.wait_for_log(r"(?m)^step 0 \| batch_size 4 \| memory allocated",
                                      START_TIMEOUT_S), alone.read_log()[-2000:]
            assert "OutOfMemoryError" not in alone.read_log()
        finally:
            assert alone.stop()

    def test_cuda_oom_diagnosed_as_gpu_held_by_other_process(self, oom_other: Scenario) -> None:
        stale = oom_other.bystander_pid
        assert stale is not None
        report = report_of(runbook("run", "cuda-oom", "--set", f"log={oom_other.log}", "--format", "json",
                                   *record_args("oom_other_process")))
        node = report["nodes"][0]
        assert conclusion(node) == "gpu-held-by-other-process", walked(node)
        finding = node.get("finding") or ""
        assert str(stale) in finding and "70" in finding, finding
        self._assert_not_taken_for_the_job(node, stale)
        assert_fixes_leave_alone(report, stale)
        assert oom_other.bystander_alive()  # a diagnosis ends nothing

    def test_training_hang_diagnosed_as_gpu_held_by_other_process(self, oom_other: Scenario) -> None:
        """The entry point finds the job gone (not the notebook) and reaches the same verdict."""
        stale = oom_other.bystander_pid
        assert stale is not None
        report = report_of(runbook("run", "training-hang", "--set", f"log={oom_other.log}",
                                   "--format", "json", *record_args("oom_other_process-training-hang")))
        node = report["nodes"][0]
        assert conclusion(node) == "gpu-held-by-other-process", walked(node)
        assert node["conclusion"]["runbook"] == "cuda-oom"
        assert str(stale) in (node.get("finding") or ""), node.get("finding")
        self._assert_not_taken_for_the_job(node, stale)
        assert_fixes_leave_alone(report, stale)

    @staticmethod
    def _assert_not_taken_for_the_job(node: dict[str, Any], stale: int) -> None:
        """find-process: the job has exited, and the notebook is listed as foreign, not as it."""
        found = evidence(node, "find-process")
        assert found["found"] is False and found["job_exited"] is True, found
        assert stale not in (found.get("pids") or []) and found.get("pid") != stale, found
        assert stale in (found.get("foreign_pids") or []), found
