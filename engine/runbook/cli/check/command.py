"""`runbook check TYPE`: run one check ad hoc on nodes, like `ansible -m`."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from runbook.cli.interrupts import interrupt_reason


def run(args: argparse.Namespace) -> int:
    from runbook.run.adhoc import ask_all, check_module, check_report, render_text, validate
    from runbook.run.nodes import NodeSpecError
    from runbook.run.targets import nodes_from_args, transports_from_args

    try:
        module = check_module(args.type)
        params = parse_withs(args.withs)
        validate(args.type, module.PARAMS, params)
        nodes = nodes_from_args(args)
    except (ValueError, NodeSpecError) as exc:
        print(f"runbook check: {exc}", file=sys.stderr)
        return 2
    timeout = args.timeout or float(module.DEFAULT_TIMEOUT)
    request = {"check": args.type, "with": params, "step": f"check:{args.type}"}
    answers, interrupted = ask_all(transports_from_args(args), nodes, request, timeout, args.forks)
    report = check_report(args.type, params, answers)
    if interrupted:
        report.update(incomplete=True, reason=interrupt_reason())
    if args.format == "json":
        print(json.dumps(report, indent=2, ensure_ascii=False, default=str))
    else:
        sys.stdout.write(render_text(report))
    if interrupted:
        print(f"runbook check: {report['reason']}: the report is incomplete", file=sys.stderr)
        return 130
    failed = any(a["status"] != "ok" or (a["result"] or {}).get("timed_out") for a in answers)
    return 3 if failed else 0


def parse_withs(items: list[str]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--with {item!r}: expected KEY=VALUE")
        try:
            params[key] = json.loads(raw)
        except ValueError:
            params[key] = raw
    return params
