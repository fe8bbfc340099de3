"""`runbook check TYPE`: run one check ad hoc on nodes, like `ansible -m`."""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

from runbook.cli.interrupts import interrupt_reason

REPORT_SCHEMA = "runbook-check/v1"


def run(args: argparse.Namespace) -> int:
    from runbook.checks import CHECK_TYPES, load_check
    from runbook.format.problems import did_you_mean
    from runbook.run.nodes import NodeSpecError
    from runbook.run.targets import nodes_from_args, transports_from_args

    if args.type not in CHECK_TYPES:
        print(f"runbook check: no check type {args.type!r}{did_you_mean(args.type, CHECK_TYPES)} "
              f"(types: {', '.join(sorted(CHECK_TYPES))})", file=sys.stderr)
        return 2
    module = load_check(args.type)
    try:
        params = parse_withs(args.withs)
        validate(args.type, module.PARAMS, params)
        nodes = nodes_from_args(args)
    except (ValueError, NodeSpecError) as exc:
        print(f"runbook check: {exc}", file=sys.stderr)
        return 2
    timeout = args.timeout or float(module.DEFAULT_TIMEOUT)
    request = {"check": args.type, "with": params, "step": f"check:{args.type}"}
    answers, interrupted = _ask_all(transports_from_args(args), nodes, request, timeout, args.forks)
    report: dict[str, Any] = {"schema": REPORT_SCHEMA, "check": args.type, "with": params,
                              "nodes": answers}
    if interrupted:
        report.update(incomplete=True, reason=interrupt_reason())
    if args.format == "json":
        print(json.dumps(report, indent=2, ensure_ascii=False, default=str))
    else:
        sys.stdout.write(render(report))
    if interrupted:
        print(f"runbook check: {report['reason']}: the report is incomplete", file=sys.stderr)
        return 130
    failed = any(a["status"] != "ok" or (a["result"] or {}).get("timed_out") for a in answers)
    return 3 if failed else 0


def _ask_all(transport: Any, nodes: list[Any], request: dict[str, Any], timeout: float,
             forks: int) -> tuple[list[dict[str, Any]], bool]:
    """Every node's answer, in node order, and whether Ctrl-C stopped the asking. The nodes
    that had not answered by then are `timeout` with the reason `interrupted`."""
    pool = ThreadPoolExecutor(max_workers=max(1, min(forks, len(nodes))))
    answers: dict[str, dict[str, Any]] = {}
    interrupted = False
    try:
        futures = {pool.submit(_ask, transport, n, request, timeout): n for n in nodes}
        for future in as_completed(futures):
            answers[futures[future].name] = future.result()
    except KeyboardInterrupt:
        interrupted = True
    finally:
        transport.close()  # on Ctrl-C: stops the probes still running on the nodes
        pool.shutdown(wait=not interrupted, cancel_futures=True)
    return [answers.get(n.name) or {"node": n.name, "status": "timeout", "result": None,
                                    "error": "interrupted", "duration_s": 0.0}
            for n in nodes], interrupted




def _ask(transport: Any, node: Any, request: dict[str, Any], timeout: float) -> dict[str, Any]:
    start = time.monotonic()
    answer = transport.run_check(node, request, timeout)
    return {"node": node.name, "status": answer.status, "result": answer.result,
            "error": answer.error, "duration_s": round(time.monotonic() - start, 3)}


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


def validate(ctype: str, schema: dict[str, Any], params: dict[str, Any]) -> None:
    from jsonschema import Draft202012Validator

    from runbook.format.problems import did_you_mean

    known = list(schema.get("properties", {}))
    for error in Draft202012Validator(schema).iter_errors(params):
        if error.validator == "additionalProperties":
            bad = next(k for k in params if k not in known)
            raise ValueError(f"--with {bad}: check {ctype!r} has no parameter {bad!r}"
                             f"{did_you_mean(bad, known)} (its parameters: {', '.join(known)})")
        where = ".".join(map(str, error.absolute_path)) or "(parameters)"
        raise ValueError(f"--with {where}: {error.message}")


def render(report: dict[str, Any]) -> str:
    out: list[str] = []
    for answer in report["nodes"]:
        head = f"{answer['node']}: {answer['status']} ({answer['duration_s']:.2f}s)"
        out.append(head if answer["status"] == "ok" else f"{head}: {answer['error']}")
        for key, value in (answer["result"] or {}).items():
            shown = value if isinstance(value, (str, int, float, bool)) or value is None \
                else json.dumps(value, ensure_ascii=False, default=str)
            text = str(shown)
            out.append(f"  {key}: {text if len(text) <= 200 else text[:197] + '...'}")
    if report.get("incomplete"):
        waiting = sum(a["error"] == "interrupted" for a in report["nodes"])
        out.append(f"INCOMPLETE: {report['reason']}; {waiting} node(s) had not answered")
    return "\n".join(out) + "\n"
