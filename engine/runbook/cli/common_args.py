"""Arguments shared by several subcommands (argparse only)."""

from __future__ import annotations

import argparse
import os


def default_lang() -> str:
    """`zh` when the locale says Chinese, else `en`."""
    for name in ("RUNBOOK_LANG", "LC_ALL", "LC_MESSAGES", "LANG", "LANGUAGE"):
        value = os.environ.get(name, "")
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    return "en"


def positive_int(value: str) -> int:
    """An argparse type: a whole number of at least 1 (`--top N`)."""
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return number


def add_lang(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lang", choices=("en", "zh"), default=default_lang(),
                        help="language of the output (default: from the locale)")


def add_format(parser: argparse.ArgumentParser, formats: tuple[str, ...] = ("text", "json")) -> None:
    parser.add_argument("--format", choices=formats, default="text", help="output format")


def add_node_args(parser: argparse.ArgumentParser) -> None:
    """Where to run: nodes, inventories, executors, and how to reach them."""
    where = parser.add_argument_group("nodes")
    where.add_argument("--nodes", help="nodes: a,b  gpu[001-064]  @hostfile  localhost "
                       "(default: this machine)")
    where.add_argument("--slurm-job", metavar="ID", help="a Slurm job: its nodes, reached through its "
                       "own allocation (srun --overlap), and its StdOut as the default log")
    where.add_argument("--slurm-nodes", metavar="HOSTLIST", help="idle Slurm nodes (gpu[01-64]): "
                       "allocated for this run (salloc, job name runbook-health), checked through "
                       "that allocation without SSH, and released at its end")
    add_reach_args(where)


def add_reach_args(where: argparse._ActionsContainer) -> None:
    """The inventory and how nodes are reached (for commands that get their nodes elsewhere)."""
    where.add_argument("--inventory", "-i", help="inventory file: ours (YAML) or Ansible INI/YAML")
    where.add_argument("--group", "-g", help="the inventory group to use (default: all hosts)")
    where.add_argument("--executor", choices=("local", "ssh", "ray"), default=None,
                       help="how to reach nodes (default: local for localhost, ssh otherwise)")
    where.add_argument("--ray-address", help="Ray cluster address for --executor ray "
                       "(default: auto, the cluster this machine belongs to)")
    where.add_argument("--python", help="the Python that runs the probe on nodes "
                       "(default: python3; use the training environment's)")
    where.add_argument("--connect-timeout", type=float, default=10.0, metavar="S",
                       help="SSH connect timeout per node (default 10)")
    where.add_argument("--ssh-persist", type=float, default=60.0, metavar="S",
                       help="keep each node's SSH connection open S seconds after the run, for the "
                       "next run to reuse (default 60; 0: off; `runbook ssh-masters --stop` ends them)")
    where.add_argument("--accept-new-host-keys", action="store_true",
                       help="accept SSH host keys missing from known_hosts (default: refuse)")
    where.add_argument("--gateways", metavar="NODESET", help="reach the SSH nodes through these "
                       "gateways (gw[1-4], or an --inventory group): one connection per gateway, "
                       "each gateway's ssh fans out to its share of the nodes (contiguous blocks, or "
                       "a node's inventory `gateway:`)")
    where.add_argument("--gateway-fanout", type=positive_int, default=64, metavar="N",
                       help="SSH handshakes under way at once on each gateway (default 64)")
    where.add_argument("--forks", type=int, default=256,
                       help="checks run at once across nodes (default 256)")
