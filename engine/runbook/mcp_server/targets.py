"""The nodes a tool call names (`nodes`, `inventory`, `group`, `slurm_job`), read by the same code
as the command line's node arguments (run/targets.py), and capped by --max-nodes."""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass

from runbook.mcp_server.answer import ToolInputError
from runbook.mcp_server.safety import ServerOptions, check_node_count
from runbook.run.nodes import NodeSpecError
from runbook.run.targets import JobNotRunning, nodes_from_args
from runbook.transports import Node

FORKS = 64  # checks at once across nodes
CONNECT_TIMEOUT_S = 10.0  # as `runbook run --connect-timeout`


@dataclass(frozen=True)
class Where:
    """Where a call runs: nothing names this machine, as `runbook run` without --nodes."""

    nodes: str | None = None
    inventory: str | None = None
    group: str | None = None
    slurm_job: str | None = None


def node_arguments(where: Where, options: ServerOptions) -> argparse.Namespace:
    """The namespace run/targets.py reads, as the command line would give it (SSH keys of unknown
    hosts refused, the probe run by the nodes' python3)."""
    return argparse.Namespace(
        nodes=where.nodes, inventory=where.inventory, group=where.group, slurm_job=where.slurm_job,
        slurm_nodes=None, executor=None, ray_address=None, python=None,
        connect_timeout=CONNECT_TIMEOUT_S, accept_new_host_keys=False, forks=FORKS,
        timeout=options.timeout_s, watch=None)


def reach(where: Where, options: ServerOptions) -> tuple[argparse.Namespace, list[Node]]:
    """The node arguments and the nodes; ToolInputError for a bad expression, a missing inventory,
    a job that does not run, or more nodes than --max-nodes."""
    args = node_arguments(where, options)
    try:
        nodes = nodes_from_args(args)
    except JobNotRunning as exc:
        raise ToolInputError(f"slurm_job: {exc.job.describe()}: nothing runs to check; "  # type: ignore[attr-defined]
                             "triage its log with triage_log instead") from None
    except (NodeSpecError, ValueError) as exc:
        raise ToolInputError(as_argument(str(exc), where)) from None
    check_node_count(nodes, options)
    return args, nodes


def as_argument(message: str, where: Where) -> str:
    """A node error named by the tool's argument: `--slurm-job 12: ...` -> `slurm_job 12: ...`."""
    flag = re.match(r"--([a-z-]+)", message)
    if flag:
        return flag.group(1).replace("-", "_") + message[flag.end():]
    return f"{_named(where)}: {message}"


def _named(where: Where) -> str:
    """Which argument a node error is about."""
    if where.slurm_job:
        return "slurm_job"
    return "inventory" if where.inventory and not where.nodes else "nodes"
