"""The engine over N simulated nodes: client time, CPU and memory per node, with no transport.

    .venv/bin/python bench/scale.py [--nodes 1000 10000] [--latency-ms 5] [--jitter-ms 5]
                                    [--hang-share 0.01] [--unreachable-share 0.01] [--json]
                                    [--profile] [--stream] [--batching]

Every node walks `training-hang` on canned answers (a stalled job whose stacks and flight
records say nothing, so each node goes through every analysed step: the longest path). The
transport answers after `latency` plus up to `jitter` milliseconds; a share of nodes answers
every check with a timeout (a hang is a finding) and a share is unreachable. It prints wall
time, the client's CPU time, peak memory, and both per node (and the CPU of the walk's own
thread per node: the engine without the transport's threads), so growth faster than linear shows
as a per-node cost that climbs with N; then the time to build the report (JSON document, the
grouped text report) from the outcomes, and the size of each. `--profile` runs the walk under
cProfile and prints where its time goes (slower: the figures are for reading, not comparing).
With --stream the report is the streamed one (`--format jsonl`): each node's line is written as
it finishes (its CPU counts in the walk's) and its evidence dropped; "report CPU s" is then the
fixes and summary lines after the walk. With --batching the transport answers each group of
nodes itself (`run_many`, as a multiplexed transport would) instead of node by node from the
engine's threads. Peak memory is the process's: measure one size per
process to compare.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import math
import pstats
import random
import resource
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "engine"))

from runbook.library.runbooks import load_library  # noqa: E402
from runbook.report.build import build_report  # noqa: E402
from runbook.report.stream import JsonLinesReporter  # noqa: E402
from runbook.report.text import TextReporter  # noqa: E402
from runbook.run.walk import Walk, WalkOptions  # noqa: E402
from runbook.transports import Node, ProbeAnswer  # noqa: E402
from runbook.transports.local import parse_answer  # noqa: E402

CANNED: dict[str, dict[str, Any]] = {
    "find-process": {"found": True, "pid": 1, "cpu_percent": 1.0,
                     "processes": [{"pid": 1, "rank": 0, "world_size": 1}]},
    "read-log": {"exists": True, "age_s": 900,
                 "patterns": {"loader_progress": {"count": 0}, "first_batch": {"count": 0}}},
    "probe-gpu": {"available": True, "max_util": 100, "driver_version": "550.54.15"},
    "straggler-gpu": {"available": True, "max_util": 100},
    "stack-dump": {"available": True, "processes": [{"main_wait": "running"}], "distinct_ops": [],
                   "mismatched": False},
    "flight-records": {"found": False, "dumps": [], "errors": []},
    "nccl-settings": {"available": True, "settings": {"NCCL_SOCKET_IFNAME": "ib0"}},
}


class SimulatedTransport:
    """Canned answers after a latency; some nodes hang on every check, some cannot be reached.
    Each answer is parsed from the probe's answer line by the function the SSH, gateway and local
    transports use (`parse_answer`): every node's result is its own objects (sharing them would
    flatter the engine's memory)."""

    def __init__(self, latency_s: float, jitter_s: float, hanging: set[str], unreachable: set[str]) -> None:
        self.latency_s, self.jitter_s = latency_s, jitter_s
        self.hanging, self.unreachable = hanging, unreachable
        self.lines = {step: json.dumps({"result": {"timed_out": False, **answer}}).encode()
                      for step, answer in CANNED.items()}

    def run_check(self, node: Node, request: dict[str, Any], timeout: float) -> ProbeAnswer:
        time.sleep(self.latency_s + random.random() * self.jitter_s)
        return self._answer(node, request)

    def _answer(self, node: Node, request: dict[str, Any]) -> ProbeAnswer:
        if node.name in self.unreachable:
            return ProbeAnswer("unreachable", error="connection refused (simulated)")
        if node.name in self.hanging:
            return ProbeAnswer("ok", {"timed_out": True, "reason": "simulated hang"})
        return parse_answer(self.lines.get(request["step"], b'{"result": {"timed_out": false}}'), b"", 0, 0.0)

    def close(self) -> None:
        pass


class BatchingTransport(SimulatedTransport):
    """The same nodes and answers, but each group of nodes asked at once is answered by the
    transport itself (`run_many`), as a multiplexed transport would: no thread per node, each
    answer yielded when its latency and jitter have passed."""

    def run_many(self, nodes: list[Node], request: dict[str, Any],
                 timeout: float) -> Iterator[tuple[int, ProbeAnswer]]:
        start = time.monotonic()
        due = sorted((self.latency_s + random.random() * self.jitter_s, i) for i in range(len(nodes)))
        for after, i in due:
            wait = start + after - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            yield i, self._answer(nodes[i], request)



def measure(n: int, args: argparse.Namespace, library: Any) -> dict[str, Any]:
    profile = cProfile.Profile() if args.profile else None
    names = [f"gpu{i:06d}" for i in range(n)]
    rng = random.Random(n)
    hanging = set(rng.sample(names, int(n * args.hang_share)))
    unreachable = set(rng.sample(sorted(set(names) - hanging), int(n * args.unreachable_share)))
    kind = BatchingTransport if args.batching else SimulatedTransport
    transport = kind(args.latency_ms / 1000, args.jitter_ms / 1000, hanging, unreachable)
    params = {"log": "/var/log/train.log"}
    runbook = library.get("training-hang")
    lines = tempfile.NamedTemporaryFile(suffix=".jsonl", delete=False) if args.stream else None  # noqa: SIM115
    streamed = JsonLinesReporter(lang="en") if lines else None
    if streamed and lines:
        streamed.stream_to(lines.name)
        streamed.start(runbook, params, "2026-01-01T00:00:00Z")
    walk = Walk(library, runbook, [Node(x, "local") for x in names], transport, params,
                WalkOptions(forks=args.forks, deadline_s=3600), [streamed] if streamed else [])
    # Compiled on first use, once per process whatever N is (about 0.5 s): not a cost per node.
    library.by_id[runbook.id].compiled.when  # noqa: B018
    wall, cpu, own = time.perf_counter(), time.process_time(), time.thread_time()
    outcomes = walk.run() if profile is None else profile.runcall(walk.run)
    wall, cpu, own = time.perf_counter() - wall, time.process_time() - cpu, time.thread_time() - own
    if profile is not None:
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats("runbook|concurrent", 25)
        print(out.getvalue(), file=sys.stderr)
    concluded = sum(o.conclusion is not None for o in outcomes)
    report_cpu = time.process_time()
    report = build_report(walk.runbook, outcomes, "2026-01-01T00:00:00Z", wall, "en",
                          params, job_verdicts=walk.job_verdicts)
    if streamed and lines:
        streamed.render(report)
        json_bytes, text = Path(lines.name).stat().st_size, ""
        Path(lines.name).unlink()
    else:
        json_bytes = len(json.dumps(report))
        text = TextReporter("en").render(report)
    report_cpu = time.process_time() - report_cpu
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"nodes": n, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "wall_ms_per_node": round(1000 * wall / n, 3), "cpu_ms_per_node": round(1000 * cpu / n, 3),
            "walk_thread_ms_per_node": round(1000 * own / n, 3),
            "report_cpu_s": round(report_cpu, 2), "json_mb": round(json_bytes / 1e6, 1),
            "text_lines": text.count("\n"), "peak_mb": round(peak_mb, 1), "concluded": concluded,
            "hanging": len(hanging), "unreachable": len(unreachable)}


def gateway_projection(rows: list[dict[str, Any]], costs_file: str, fleet: int = 100_000,
                       widths: tuple[int, ...] = (16, 64, 256)) -> dict[str, Any]:
    """The client's CPU for `fleet` nodes through K gateways: the engine's CPU per node measured
    here (the largest N above) plus the client's CPU per gateway that `bench/fanout/run.py
    --gateways K --json` measured on real sshds (its `gateway_costs`), against the flat SSH
    run's CPU per node measured in the same fan-out run. Each gateway holds fleet/K nodes."""
    fanout = json.loads(Path(costs_file).read_text())
    per_gateway_ms = (fanout.get("gateway_costs") or {}).get("per_gateway_ms")
    flat_ms = next((m["tool_cpu_ms_per_host"] for m in fanout.get("methods", [])
                    if m.get("tool") == "runbook" and m.get("hosts", 0) > 1 and "via" not in m["name"]), None)
    if per_gateway_ms is None or flat_ms is None:
        raise SystemExit(f"{costs_file}: no gateway_costs or flat run (run bench/fanout/run.py "
                         "--gateways K --json, K >= 2)")
    engine_ms = max(rows, key=lambda r: r["nodes"])["cpu_ms_per_node"]
    return {"fleet": fleet, "engine_ms_per_node": engine_ms, "per_gateway_ms": round(per_gateway_ms, 1),
            "flat_ssh_client_cpu_s": round(flat_ms * fleet / 1000, 1),
            "through_gateways": [{"gateways": k, "nodes_per_gateway": math.ceil(fleet / k),
                                  "client_cpu_s": round((engine_ms * fleet + per_gateway_ms * k) / 1000, 1),
                                  "of_which_gateways_s": round(per_gateway_ms * k / 1000, 1)}
                                 for k in widths]}


def print_projection(projection: dict[str, Any]) -> None:
    print(f"\n{projection['fleet']:,} nodes: flat SSH client CPU {projection['flat_ssh_client_cpu_s']} s; "
          f"through gateways (engine {projection['engine_ms_per_node']} ms/node, "
          f"{projection['per_gateway_ms']} ms/gateway):")
    for row in projection["through_gateways"]:
        print(f"  {row['gateways']:>4} gateways x {row['nodes_per_gateway']:>6} nodes: client CPU "
              f"{row['client_cpu_s']} s ({row['of_which_gateways_s']} s of it the gateways')")


COLUMNS = [("nodes", "nodes"), ("wall_s", "walk s"), ("cpu_s", "walk CPU s"),
           ("cpu_ms_per_node", "CPU ms/node"), ("walk_thread_ms_per_node", "walk thr ms/n"),
           ("report_cpu_s", "report CPU s"), ("json_mb", "JSON MB"),
           ("text_lines", "text lines"), ("peak_mb", "peak MB"), ("concluded", "concluded")]


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--jitter-ms", type=float, default=0.0)
    parser.add_argument("--hang-share", type=float, default=0.01)
    parser.add_argument("--unreachable-share", type=float, default=0.01)
    parser.add_argument("--forks", type=int, default=256)
    parser.add_argument("--gateway-costs", metavar="FANOUT_JSON", help="project 100,000 nodes "
                        "through gateways with the costs `bench/fanout/run.py --gateways K --json` measured")
    parser.add_argument("--json", action="store_true", help="one JSON document")
    parser.add_argument("--profile", action="store_true", help="print the walk's profile on stderr")
    parser.add_argument("--batching", action="store_true",
                        help="the transport answers each group itself (run_many), no thread per node")
    parser.add_argument("--stream", action="store_true",
                        help="the streamed report (--format jsonl) instead of the JSON document and text")
    args = parser.parse_args()
    library = load_library()
    rows = [measure(n, args, library) for n in args.nodes]
    projection = gateway_projection(rows, args.gateway_costs) if args.gateway_costs else None
    if args.json:
        print(json.dumps({"runs": rows, **({"gateways": projection} if projection else {})}, indent=2))
    else:
        print("".join(f"{title:>14}" for _, title in COLUMNS))
        for row in rows:
            print("".join(f"{row[key]:>14}" for key, _ in COLUMNS))
        print(f"goal: 100,000 nodes under 10 s of client CPU (0.1 ms per node); "
              f"{args.hang_share:.0%} hanging, {args.unreachable_share:.0%} unreachable")
        if projection:
            print_projection(projection)
    return 0


if __name__ == "__main__":
    sys.exit(main())
