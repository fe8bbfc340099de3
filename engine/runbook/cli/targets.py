"""The nodes a command names and the transports that reach them (shared by run and check)."""

from __future__ import annotations

import argparse
import socket

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


def nodes_from_args(args: argparse.Namespace) -> list[Node]:
    """Raises NodeSpecError or ValueError with a one-line message; JobNotRunning for a
    `--slurm-job` that does not run."""
    from runbook.run.nodes import build_nodes, expand

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
    return build_nodes(args.nodes, args.inventory, args.group, args.executor)


def transports_from_args(args: argparse.Namespace) -> NodeTransports:
    return NodeTransports(
        local={"python": args.python},
        ssh={"python": args.python, "connect_timeout": args.connect_timeout,
             "accept_new_host_keys": args.accept_new_host_keys},
        ray={"address": args.ray_address, "python": args.python},
        slurm={"python": args.python})
