"""`runbook run ID`: walk a runbook on nodes and report every node's conclusion."""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime, timezone
from pathlib import Path


def run(args: argparse.Namespace) -> int:
    from runbook.cli.params import ParamError, parse_sets
    from runbook.cli.resolve import find_runbook
    from runbook.cli.targets import nodes_from_args, transports_from_args
    from runbook.library import load_library
    from runbook.nodes import NodeSpecError
    from runbook.report import get_reporter
    from runbook.report.build import build_report
    from runbook.report.text import is_tty
    from runbook.walk import Walk, WalkOptions

    library = load_library()
    runbook = find_runbook(args.id, library)
    if runbook is None:
        return 2
    try:
        params = parse_sets(runbook, args.sets)
        nodes = nodes_from_args(args)
    except (ParamError, NodeSpecError, ValueError) as exc:
        print(f"runbook: {exc}", file=sys.stderr)
        return 2
    progress = sys.stderr if is_tty(sys.stderr) else None
    reporter = get_reporter(args.format, lang=args.lang, progress=progress,
                            color=args.output is None and is_tty(sys.stdout))
    transport = transports_from_args(args)
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
