"""The nodes a command names and the transports that reach them: the node arguments of `run`,
`check` and `collect` (an argparse namespace), or the same names filled in by the MCP server's tools."""

from __future__ import annotations

import argparse
import atexit
import contextlib
import math
import socket
import sys
import threading
from pathlib import Path
from typing import Any

from runbook.transports import Node, NodeTransports


class JobNotRunning(ValueError):
    """`--slurm-job` names a job that no longer (or not yet) runs: there is nothing to probe."""

    def __init__(self, job: object) -> None:
        super().__init__(f"{job.describe()}: nothing runs to check (`runbook run` "  # type: ignore[attr-defined]
                         "explains an ended job from what Slurm keeps and its logs)")
        self.job = job


def slurm_job(args: argparse.Namespace) -> object | None:
    """The `--slurm-job` job, read once (raises SlurmError, a ValueError)."""
    if not getattr(args, "slurm_job", None):
        return None
    if getattr(args, "_slurm", None) is None:
        from runbook.run.slurm import read_job

        args._slurm = read_job(args.slurm_job)
    return args._slurm


def job_log(args: argparse.Namespace) -> str | None:
    """The `--slurm-job`'s StdOut: the default `log` of run and collect."""
    job = slurm_job(args)
    return getattr(job, "stdout", None) if job is not None else None


def default_log(args: argparse.Namespace, params: dict[str, Any], accepted: Any = None) -> None:
    """With --slurm-job, the job's StdOut is the `log` unless one was given (and, with `accepted`,
    the parameters a runbook has, only when it has a `log`)."""
    log = job_log(args)
    if log and "log" not in params and (accepted is None or "log" in accepted):
        params["log"] = log


def nodes_from_args(args: argparse.Namespace) -> list[Node]:
    """Raises NodeSpecError or ValueError with a one-line message; JobNotRunning for a
    `--slurm-job` that does not run."""
    from runbook.run.nodes import build_nodes, expand

    if getattr(args, "gateways", None):
        other = next((flag for flag, on in (("--slurm-nodes", getattr(args, "slurm_nodes", None)),
                                            ("--slurm-job", getattr(args, "slurm_job", None)),
                                            ("--executor " + str(args.executor),
                                             args.executor in ("ray", "local"))) if on), None)
        if other:
            raise ValueError(f"--gateways reaches nodes over SSH: it does not go with {other}")
    if getattr(args, "slurm_nodes", None):
        return _allocated_nodes(args)
    job = slurm_job(args)
    if job is not None:
        from runbook.run.slurm import nodes_of

        if not job.running:  # type: ignore[attr-defined]
            raise JobNotRunning(job)
        return nodes_of(job, args.python)  # type: ignore[arg-type]

    if args.executor == "ray":
        from runbook.transports.ray_cluster import discover_nodes

        found = discover_nodes(args.ray_address)
        if args.nodes:
            wanted = set(expand(args.nodes))
            found = [n for n in found if n.name in wanted or n.vars.get("address") in wanted]
        return found
    if not args.nodes and not args.inventory:
        return [Node(socket.gethostname(), "local")]
    nodes = build_nodes(args.nodes, args.inventory, args.group, args.executor)
    if getattr(args, "gateways", None):
        from runbook.transports.gateway import assign

        assign(nodes, list(gateways_from_args(args)))
    return nodes


def gateways_from_args(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """--gateways: an --inventory group (its hosts and their vars), or a node set; name -> vars."""
    from runbook.run.nodes import NodeSpecError, expand, load_inventory

    if getattr(args, "_gateways", None) is None:
        found: dict[str, dict[str, Any]] | None = None
        if args.inventory:
            with contextlib.suppress(NodeSpecError):  # not one of its groups: a node set
                found = load_inventory(Path(args.inventory), args.gateways)
        if found is None:
            try:
                found = {name: {} for name in expand(args.gateways)}
            except NodeSpecError as exc:
                raise NodeSpecError(str(exc).replace("--nodes", "--gateways", 1)) from None
        if not found:
            raise NodeSpecError(f"--gateways {args.gateways!r}: names no gateway")
        args._gateways = found
    return args._gateways  # type: ignore[no-any-return]


def transports_from_args(args: argparse.Namespace) -> NodeTransports:
    options: dict[str, Any] = dict(
        local={"python": args.python},
        ssh={"python": args.python, "connect_timeout": args.connect_timeout,
             "accept_new_host_keys": args.accept_new_host_keys,
             "persist": getattr(args, "ssh_persist", 60.0)},
        ray={"address": args.ray_address, "python": args.python},
        slurm={"python": args.python})
    if getattr(args, "gateways", None):
        options["gateway"] = {**options["ssh"], "gateways": gateways_from_args(args),
                              "fanout": getattr(args, "gateway_fanout", 64)}
    owner = getattr(args, "_slurm_allocation", None)
    if owner is not None:
        return _ReleasingTransports(owner, **options)
    return NodeTransports(**options)


# -- --slurm-nodes: the allocation this run holds, and gives back ---------------------------------


class AllocationOwner:
    """The `runbook-health` allocation of one command: released once, by the transports'
    close() (the end of the run, Ctrl-C, errors: every command closes its transports), or at
    exit when the command stopped before it made any. Its --time limit ends it otherwise
    (a second Ctrl-C, which exits at once)."""

    def __init__(self, allocation: Any) -> None:
        self.allocation = allocation
        self._lock = threading.Lock()
        atexit.register(self.release)

    def release(self) -> None:
        with self._lock:
            problem = self.allocation.release()
        if problem:
            print(f"runbook: --slurm-nodes: {problem}", file=sys.stderr)


class _ReleasingTransports(NodeTransports):
    """The transports of a --slurm-nodes run: close() stops the probes, then ends the allocation."""

    def __init__(self, owner: AllocationOwner, **options: Any) -> None:
        super().__init__(**options)
        self.owner = owner

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.owner.release()


def _allocated_nodes(args: argparse.Namespace) -> list[Node]:
    """The --slurm-nodes, allocated for this command (raises SlurmError, a ValueError)."""
    from runbook.run.slurm import allocate, allocation_nodes

    others = [flag for flag, value in (("--nodes", args.nodes), ("--slurm-job", args.slurm_job),
                                       ("--inventory", args.inventory), ("--executor", args.executor))
              if value]
    if others:
        raise ValueError(f"--slurm-nodes names the nodes: drop {', '.join(others)}")
    owner = getattr(args, "_slurm_allocation", None)
    if owner is None:
        owner = args._slurm_allocation = AllocationOwner(allocate(args.slurm_nodes, _minutes(args)))
    return allocation_nodes(owner.allocation, args.python)


def _minutes(args: argparse.Namespace) -> int:
    """The allocation's --time: the command's own bound and a margin (its limit is a backstop)."""
    seconds = float(getattr(args, "timeout", None) or 300.0)
    if getattr(args, "watch", None) is not None:
        seconds += float(getattr(args, "watch_for", None) or 3600.0)
    return math.ceil(seconds / 60) + 5
