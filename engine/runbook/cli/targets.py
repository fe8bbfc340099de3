"""The nodes a command names and the transports that reach them (shared by run and check)."""

from __future__ import annotations

import argparse
import socket

from runbook.transports import Node, NodeTransports


def nodes_from_args(args: argparse.Namespace) -> list[Node]:
    """Raises NodeSpecError or ValueError with a one-line message."""
    from runbook.run.nodes import build_nodes, expand

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
        ray={"address": args.ray_address, "python": args.python})
