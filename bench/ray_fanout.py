"""Five read-only checks on 1, 2, 4 ... N Ray nodes, against the same checks over SSH, and a
projection to 2,000 nodes.

    .venv/bin/python bench/ray_fanout.py [--nodes 8] [--repeat 3] [--json]

For each size n (powers of two up to --nodes, and --nodes itself) it starts a real Ray cluster
of n nodes on this machine (scenarios/clusters/ray.py: a head and n-1 workers, one CPU and a
78 MiB object store each) and times `runbook run fanout-5 --executor ray` on it; then the same
runbook over SSH on n fake OpenSSH hosts (scenarios/clusters/ssh.py). Each run is verified: exit 0,
and every node concluded `all-read`. It reports wall-clock seconds and the client's CPU seconds
(the runbook process and its children), per node and per check, the medians of --repeat runs.

On each Ray cluster it also walks the nodes in this process, round by round, to split the cost:
the first round creates one probe actor per node (Ray schedules it, a worker starts, the bundle
comes from the object store), the next rounds are one actor call per node and check.

From those points it fits cost = a + b*n (least squares) for wall time and client CPU and
projects 2,000 nodes. Exit 0 even when slow; 1 when a run fails verification.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for path in (ROOT, ROOT / "engine"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from scenarios.clusters.ray import RayCluster  # noqa: E402
from scenarios.clusters.ssh import Cluster, ClusterError, find_python_dir, requirements_missing  # noqa: E402

RUNBOOKS = ROOT / "bench" / "fanout" / "runbooks"
RUNBOOK_ID, CONCLUSION, CHECKS = "fanout-5", "all-read", 5
RUN_TIMEOUT_S = 300.0
PROJECT_TO = 2000
ROUNDS = 4  # steady rounds of the in-process split, after the one that creates the actors


class RunFailed(Exception):
    """A run that did not do what it should: non-zero exit, a node missing or not concluded."""


@dataclass
class Sample:
    wall: float
    cpu: float  # the runbook process and its children


@dataclass
class Point:
    """One executor at one size: the median of its runs."""

    executor: str
    nodes: int
    wall_s: float | None = None
    cpu_s: float | None = None
    runs: list[float] = field(default_factory=list)
    error: str | None = None
    split: dict[str, float] = field(default_factory=dict)  # Ray only: first round vs the next ones

    def per_node_ms(self, what: str) -> float | None:
        value = getattr(self, what)
        return None if value is None else 1000 * value / self.nodes

    def per_check_ms(self, what: str) -> float | None:
        value = getattr(self, what)
        return None if value is None else 1000 * value / (self.nodes * CHECKS)


# ----------------------------------------------------------------------------- running


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_run(argv: list[str], env: dict[str, str], names: list[str] | None, n: int) -> Sample:
    """Run `runbook run` once, in its own process group; verify its JSON report."""
    cpu0, start = children_cpu_s(), time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=RUN_TIMEOUT_S)
    except BaseException:  # a timeout or Ctrl-C: the whole run goes
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise RunFailed(f"no result after {RUN_TIMEOUT_S:g}s (killed)") from None
    sample = Sample(time.perf_counter() - start, children_cpu_s() - cpu0)
    try:
        report = json.loads(out)
    except ValueError:
        raise RunFailed(f"exited {proc.returncode} without a JSON report: {tail(err)}") from None
    nodes = report.get("nodes", [])
    bad = [f"{x.get('node')}: {x.get('status')} {x.get('reason') or ''}".strip() for x in nodes
           if x.get("status") != "concluded" or (x.get("conclusion") or {}).get("id") != CONCLUSION]
    found = {x.get("node") for x in nodes}
    if proc.returncode != 0 or bad or len(found) != n or (names and found != set(names)):
        raise RunFailed(f"exited {proc.returncode}; {len(found)} of {n} nodes reported; not "
                        f"{CONCLUSION}: {', '.join(bad[:4]) or 'none'}")
    return sample


def tail(text: str, n: int = 400) -> str:
    text = (text or "").strip()
    return ("..." + text[-n:]) if len(text) > n else text


def measure(point: Point, run: Any, repeat: int) -> None:
    samples: list[Sample] = []
    for _ in range(repeat):
        try:
            samples.append(run())
        except RunFailed as exc:
            point.error = str(exc)
            break
    point.runs = [round(s.wall, 3) for s in samples]
    if samples and not point.error:
        point.wall_s = statistics.median(s.wall for s in samples)
        point.cpu_s = statistics.median(s.cpu for s in samples)


def ray_argv(address: str, log: Path) -> list[str]:
    return [sys.executable, "-m", "runbook", "run", RUNBOOK_ID, "--executor", "ray", "--ray-address",
            address, "--set", f"log={log}", "--set", f"logdir={log.parent}", "--format", "json"]


def ssh_argv(n: int, log: Path) -> list[str]:
    nodes = "node01" if n == 1 else f"node[01-{n:02d}]"
    return [sys.executable, "-m", "runbook", "run", RUNBOOK_ID, "--nodes", nodes, "--forks", str(n),
            "--set", f"log={log}", "--set", f"logdir={log.parent}", "--format", "json"]


def split_cost(address: str, log: Path) -> dict[str, float]:
    """In this process: the round that creates each node's probe actor, then ROUNDS more, each
    one `file` check per node at once. Wall and this process's CPU (the Ray driver's threads)."""
    from runbook.transports.bundle import bundle_bytes
    from runbook.transports.ray_cluster import RayTransport, discover_nodes

    transport = RayTransport(address=address)
    request = {"check": "file", "with": {"path": str(log)}}
    try:
        nodes = discover_nodes(address)
        rounds = []
        with ThreadPoolExecutor(max(1, len(nodes))) as pool:
            for _ in range(1 + ROUNDS):
                wall0, cpu0 = time.perf_counter(), time.process_time()
                answers = list(pool.map(lambda node: transport.run_check(node, request, 10), nodes))
                rounds.append((time.perf_counter() - wall0, time.process_time() - cpu0))
                if any(a.status != "ok" for a in answers):
                    raise RunFailed("in-process round: " + "; ".join(str(a.error) for a in answers
                                                                     if a.status != "ok")[:300])
    finally:
        transport.close()
    steady_wall = statistics.median(w for w, _ in rounds[1:])
    steady_cpu = statistics.median(c for _, c in rounds[1:])
    return {"first_round_s": rounds[0][0], "first_round_cpu_s": rounds[0][1],
            "round_s": steady_wall, "round_cpu_s": steady_cpu,
            "create_cpu_per_node_ms": 1000 * max(0.0, rounds[0][1] - steady_cpu) / len(nodes),
            "call_cpu_per_node_ms": 1000 * steady_cpu / len(nodes),
            "bundle_bytes": float(len(bundle_bytes()))}


# ----------------------------------------------------------------------------- the fit


def fit(points: list[tuple[int, float]]) -> tuple[float, float] | None:
    """(a, b) of cost = a + b*n by least squares; None with fewer than two sizes."""
    if len({n for n, _ in points}) < 2:
        return None
    mean_n = statistics.fmean(n for n, _ in points)
    mean_c = statistics.fmean(c for _, c in points)
    b = (sum((n - mean_n) * (c - mean_c) for n, c in points)
         / sum((n - mean_n) ** 2 for n, _ in points))
    return mean_c - b * mean_n, b


def projection(points: list[Point]) -> dict[str, Any]:
    out: dict[str, Any] = {"nodes": PROJECT_TO}
    for executor in ("ray", "ssh"):
        mine = [p for p in points if p.executor == executor and p.wall_s is not None]
        for what in ("wall_s", "cpu_s"):
            line = fit([(p.nodes, getattr(p, what)) for p in mine])
            if line is not None:
                a, b = line
                # b < 0 means noise beat growth: the document keeps `at` null rather than a guess.
                out[f"{executor}_{what}"] = {"a": a, "b_per_node": b,
                                             "at": a + b * PROJECT_TO if b >= 0 else None}
    splits = [p for p in points if p.executor == "ray" and p.split]
    if splits:
        biggest = splits[-1].split
        first = fit([(p.nodes, p.split["first_round_s"]) for p in splits])
        out["ray_parts"] = {
            # Wall of the round that creates the actors (upper bound: here the workers start on 2 cores).
            "first_round_s": None if first is None or first[1] < 0 else first[0] + first[1] * PROJECT_TO,
            "driver_cpu_creations_s": biggest["create_cpu_per_node_ms"] * PROJECT_TO / 1000,
            "driver_cpu_per_round_s": biggest["call_cpu_per_node_ms"] * PROJECT_TO / 1000,
            "bundle_transfer_mb": biggest["bundle_bytes"] * PROJECT_TO / 1e6,
        }
    return out


ASSUMPTIONS = [
    "cost = a + b*n, fitted by least squares on the sizes measured here; all nodes share this",
    "  machine's cores, so node-side work (worker and probe starts, the checks) is serialised here",
    "  and runs in parallel on a real cluster: the wall fit is an upper bound, the client CPU fit",
    "  (the runbook process alone) is what grows with n on a real cluster.",
    "Ray: one probe actor per node, created on its first check (the GCS schedules each creation,",
    "  a worker process starts on the node, in parallel across nodes), then one actor call per",
    "  check: no task to schedule and no worker to start per check.",
    "Ray object store: the bundle is put once by the driver and pulled once by each node.",
    "SSH: one connection and one serving probe per node, --forks n threads in the client.",
]


# ----------------------------------------------------------------------------- report


def fmt(value: float | None, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def print_table(points: list[Point], proj: dict[str, Any], header: str) -> None:
    print(header)
    print(f"{'nodes':>5} {'executor':<8} {'wall s':>8} {'client CPU s':>13} {'wall/check ms':>14}"
          f" {'CPU/node ms':>12} {'CPU/check ms':>13}   runs (s)")
    for p in points:
        runs = " ".join(f"{r:.2f}" for r in p.runs)
        if p.error:
            print(f"{p.nodes:>5} {p.executor:<8} {'FAILED':>8}   {p.error}")
            continue
        print(f"{p.nodes:>5} {p.executor:<8} {fmt(p.wall_s):>8} {fmt(p.cpu_s):>13}"
              f" {fmt(p.per_check_ms('wall_s'), '.1f'):>14} {fmt(p.per_node_ms('cpu_s'), '.0f'):>12}"
              f" {fmt(p.per_check_ms('cpu_s'), '.1f'):>13}   {runs}")
    splits = [p for p in points if p.split]
    if splits:
        print("\nRay, in process: the round that creates the actors, then one actor call per node")
        print(f"{'nodes':>5} {'1st round s':>12} {'next rounds s':>14} {'driver CPU/actor ms':>20}"
              f" {'driver CPU/call ms':>19}")
        for p in splits:
            s = p.split
            print(f"{p.nodes:>5} {s['first_round_s']:>12.2f} {s['round_s']:>14.3f}"
                  f" {s['create_cpu_per_node_ms']:>20.1f} {s['call_cpu_per_node_ms']:>19.2f}")
    print(f"\nProjection to {PROJECT_TO} nodes (cost = a + b*n):")
    for key, label in (("ray_wall_s", "Ray wall s"), ("ray_cpu_s", "Ray client CPU s"),
                       ("ssh_wall_s", "SSH wall s"), ("ssh_cpu_s", "SSH client CPU s")):
        if key in proj:
            f = proj[key]
            at = f"{f['at']:8.1f}" if f["at"] is not None else "n/a (b < 0: noise beats growth)"
            print(f"  {label:<18} a={f['a']:7.2f}  b={1000 * f['b_per_node']:8.1f} ms/node  -> {at}")
    if "ray_parts" in proj:
        parts = proj["ray_parts"]
        print(f"  Ray, by part: the round that creates the actors {fmt(parts['first_round_s'], '.1f')} s"
              f" (fit of the 1st round; upper bound), driver CPU {parts['driver_cpu_creations_s']:.1f} s"
              f" for the {PROJECT_TO} creations and {parts['driver_cpu_per_round_s']:.1f} s per round of"
              f" checks; the bundle pulled {parts['bundle_transfer_mb']:.0f} MB in all")
    if len({p.nodes for p in points}) < 2:
        print("  (one size measured: no fit; give --nodes 2 or more)")
    print("Assumptions:")
    for line in ASSUMPTIONS:
        print(f"  {line}")


# ----------------------------------------------------------------------------- main


def sizes_up_to(n: int) -> list[int]:
    sizes = [1 << i for i in range(n.bit_length()) if 1 << i <= n]
    return sizes if sizes[-1] == n else [*sizes, n]


def write_log(work: Path) -> Path:
    logdir = work / "logs"
    logdir.mkdir()
    log = logdir / "train.log"
    log.write_text("".join(f"step {i} loss {2.0 / (i + 1):.4f}\n" for i in range(200)))
    return log


def run_sizes(sizes: list[int], repeat: int, work: Path, log: Path, progress: Any) -> list[Point]:
    points: list[Point] = []
    env = {**os.environ, "RUNBOOK_PATH": str(RUNBOOKS), "RUNBOOK_LANG": "en"}
    for n in sizes:
        point = Point("ray", n)
        try:
            with RayCluster.start(n) as rc:
                progress(f"# {n} Ray node(s) up in {rc.startup_s:.1f} s")
                measure(point, lambda rc=rc, n=n: timed_run(ray_argv(rc.address, log), env, None, n), repeat)
                if not point.error:
                    point.split = split_cost(rc.address, log)
        except Exception as exc:  # a cluster that did not start (ray raises a bare Exception)
            point.error = point.error or f"{type(exc).__name__}: {exc}"
        points.append(point)
        progress(f"  ray {n:>3} node(s): {point.error or ' '.join(f'{r:.2f}' for r in point.runs)}")
    if missing := requirements_missing():
        progress("# SSH side skipped: " + "; ".join(missing))
        return points
    try:
        cluster = Cluster.start(max(sizes), work / "ssh", port=None, python_dir=find_python_dir())
    except ClusterError as exc:
        points.append(Point("ssh", max(sizes), error=f"cannot start the SSH hosts: {exc}"))
        return points
    try:
        ssh_env = {**cluster.env(), "RUNBOOK_PATH": str(RUNBOOKS), "RUNBOOK_LANG": "en"}
        for n in sizes:
            point = Point("ssh", n)
            names = cluster.names()[:n]
            measure(point, lambda n=n, names=names: timed_run(ssh_argv(n, log), ssh_env, names, n), repeat)
            points.append(point)
            progress(f"  ssh {n:>3} host(s): {point.error or ' '.join(f'{r:.2f}' for r in point.runs)}")
    finally:
        cluster.stop()
    return points


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench/ray_fanout.py", description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=8, help="the largest cluster; sizes 1, 2, 4 ... up "
                    "to it (default 8; `--nodes 4` is the quick mode of `make bench`)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per size and executor; medians "
                    "are reported (default 3)")
    ap.add_argument("--json", action="store_true", help="print one JSON document instead of the table")
    args = ap.parse_args(argv)
    if not 1 <= args.nodes <= 64 or args.repeat < 1:
        ap.error("--nodes must be 1..64 and --repeat >= 1")
    try:
        import ray
    except ImportError:
        print("bench/ray_fanout.py needs ray: pip install 'runbook[ray]'", file=sys.stderr)
        return 1

    def progress(line: str) -> None:
        print(line, file=sys.stderr if args.json else sys.stdout, flush=True)

    sizes = sizes_up_to(args.nodes)
    header = (f"# {os.cpu_count()} CPUs, Python {platform.python_version()}, Ray {ray.__version__};"
              f" {RUNBOOK_ID} ({CHECKS} checks per node), {args.repeat} run(s) per point, medians")
    progress(header)
    work = Path(tempfile.mkdtemp(prefix="runbook-ray-fanout-"))
    try:
        points = run_sizes(sizes, args.repeat, work, write_log(work), progress)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    finally:
        shutil.rmtree(work, ignore_errors=True)
    proj = projection(points)
    if args.json:
        print(json.dumps({"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                      "ray": ray.__version__},
                          "runbook": RUNBOOK_ID, "checks_per_node": CHECKS, "repeat": args.repeat,
                          "points": [asdict(p) for p in points], "projection": proj,
                          "assumptions": ASSUMPTIONS}, indent=2))
    else:
        print()
        print_table(points, proj, header)
    return 1 if any(p.error for p in points) else 0


if __name__ == "__main__":
    sys.exit(main())
