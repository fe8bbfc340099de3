"""`runbook collect`: seed 004's diagnosis bundle, from every node at once, under timeouts.

The collecting, redacting and writing are collect/bundle.py's (the MCP server's `collect` tool
calls the same); this command reads its arguments, prints the summary and sets the exit code.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from runbook.cli.interrupts import interrupt_reason


def run(args: argparse.Namespace) -> int:
    from runbook.collect.bundle import BundleError, check_limits, make_request, summary, write_bundle
    from runbook.run.nodes import NodeSpecError
    from runbook.run.targets import default_log, nodes_from_args, transports_from_args

    limits = _limits(args)
    try:
        check_limits(limits)
        request = make_request(args.sets, args.output, args.report, args.redact)
        nodes = nodes_from_args(args)
    except (BundleError, NodeSpecError, ValueError) as exc:
        print(f"runbook collect: {exc}", file=sys.stderr)
        return 2
    default_log(args, request.params)
    bundle = write_bundle(nodes, transports_from_args(args), request, limits, interrupt_reason)
    sys.stdout.write(summary(bundle))
    if bundle.incomplete:
        print(f"runbook collect: {bundle.incomplete}; the bundle holds what was collected and says it is "
              "incomplete", file=sys.stderr)
        return 130
    return 3 if bundle.failed else 0


def _limits(args: argparse.Namespace) -> Any:
    from runbook.collect.bundle import Limits

    return Limits(timeout=args.timeout, section_timeout=args.section_timeout, forks=args.forks,
                  connect_timeout=args.connect_timeout, python=args.python)
