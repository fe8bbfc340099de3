"""`runbook run ID`: walk a runbook on nodes and report every node's conclusion."""

from __future__ import annotations

import argparse
import socket
import sys
import time
from datetime import datetime, timezone
from pathlib import Path


def run(args: argparse.Namespace) -> int:
    from runbook.cli.params import ParamError, parse_sets
    from runbook.cli.resolve import find_runbook
    from runbook.library import load_library
    from runbook.report import get_reporter
    from runbook.report.build import build_report
    from runbook.report.text import is_tty
    from runbook.transports import get_transport
    from runbook.walk import Walk, WalkOptions

    library = load_library()
    runbook = find_runbook(args.id, library)
    if runbook is None:
        return 2
    try:
        params = parse_sets(runbook, args.sets)
        nodes = _nodes(args.nodes)
    except (ParamError, ValueError) as exc:
        print(f"runbook: {exc}", file=sys.stderr)
        return 2
    progress = sys.stderr if is_tty(sys.stderr) else None
    reporter = get_reporter(args.format, lang=args.lang, progress=progress,
                            color=args.output is None and is_tty(sys.stdout))
    transport = get_transport("local", python=args.python)
    started = datetime.now(timezone.utc)
    clock = time.monotonic()
    walk = Walk(library, runbook, nodes, transport, params,
                WalkOptions(forks=args.forks, deadline_s=args.timeout), [reporter])
    try:
        outcomes = walk.run()
    except KeyboardInterrupt:
        outcomes = walk.outcomes  # still report what was found before the interrupt
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


def _nodes(spec: str | None) -> list:  # type: ignore[type-arg]
    from runbook.transports import Node

    if not spec:
        return [Node(socket.gethostname(), "local")]
    names = [n.strip() for n in spec.split(",") if n.strip()]
    remote = [n for n in names if n not in ("localhost", "127.0.0.1", socket.gethostname())]
    if remote:
        raise ValueError(f"--nodes {remote[0]}: only this machine (localhost) can be reached "
                         "in this version; remote nodes need the SSH executor")
    return [Node(n, "local") for n in names]
