"""`runbook run ID`: walk a runbook on nodes and report every node's conclusion."""

from __future__ import annotations

import argparse
import socket
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any


def run(args: argparse.Namespace) -> int:
    from runbook.cli.params import ParamError, parse_sets
    from runbook.cli.resolve import find_runbook
    from runbook.library import load_library
    from runbook.nodes import NodeSpecError
    from runbook.report import get_reporter
    from runbook.report.build import build_report
    from runbook.report.text import is_tty
    from runbook.transports import NodeTransports
    from runbook.walk import Walk, WalkOptions

    library = load_library()
    runbook = find_runbook(args.id, library)
    if runbook is None:
        return 2
    try:
        params = parse_sets(runbook, args.sets)
        nodes = _nodes(args)
    except (ParamError, NodeSpecError, ValueError) as exc:
        print(f"runbook: {exc}", file=sys.stderr)
        return 2
    progress = sys.stderr if is_tty(sys.stderr) else None
    reporter = get_reporter(args.format, lang=args.lang, progress=progress,
                            color=args.output is None and is_tty(sys.stdout))
    transport = NodeTransports(
        local={"python": args.python},
        ssh={"python": args.python, "connect_timeout": args.connect_timeout,
             "accept_new_host_keys": args.accept_new_host_keys},
        ray={"address": args.ray_address, "python": args.python})
    started = datetime.now(timezone.utc)
    clock = time.monotonic()
    walk = Walk(library, runbook, nodes, transport, params,
                WalkOptions(forks=args.forks, deadline_s=args.timeout), [reporter])
    try:
        outcomes = walk.run()
    except KeyboardInterrupt:
        # Stop the probes still running on nodes, then report what was found so far.
        print("runbook: interrupted; stopping remote checks", file=sys.stderr)
        outcomes = walk.outcomes
    finally:
        transport.close()
    report = build_report(runbook, outcomes, started.strftime("%Y-%m-%dT%H:%M:%SZ"),
                          time.monotonic() - clock, args.lang, params)
    text = reporter.render(report)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        print(f"runbook: report written to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return int(report["summary"]["exit_code"])


def _nodes(args: argparse.Namespace) -> list[Any]:
    from runbook.nodes import build_nodes
    from runbook.transports import Node

    if args.executor == "ray":
        from runbook.transports.ray_cluster import discover_nodes

        found = discover_nodes(args.ray_address)
        if args.nodes:
            from runbook.nodes import expand

            wanted = set(expand(args.nodes))
            found = [n for n in found if n.name in wanted or n.vars.get("address") in wanted]
        return found
    if not args.nodes and not args.inventory:
        return [Node(socket.gethostname(), "local")]
    return build_nodes(args.nodes, args.inventory, args.group, args.executor)
