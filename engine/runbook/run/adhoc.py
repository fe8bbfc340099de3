"""One check run ad hoc on nodes, without a runbook (`runbook check`, the MCP server's `check`):
its parameters checked against the check type's schema, every node asked in parallel through
the transports, the answers in node order as the `runbook-check/v1` document holds them."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

from runbook.transports import Node, Transport

REPORT_SCHEMA = "runbook-check/v1"
Answer = dict[str, Any]  # {"node", "status", "result", "error", "duration_s"}


def check_module(ctype: str) -> Any:
    """The module of check type `ctype`; raises ValueError naming the types there are."""
    from runbook.checks import CHECK_TYPES, load_check
    from runbook.format.problems import did_you_mean

    if ctype not in CHECK_TYPES:
        raise ValueError(f"no check type {ctype!r}{did_you_mean(ctype, CHECK_TYPES)} "
                         f"(types: {', '.join(sorted(CHECK_TYPES))})")
    return load_check(ctype)


def validate(ctype: str, schema: dict[str, Any], params: dict[str, Any], label: str = "--with") -> None:
    """Raises ValueError naming the first parameter that is wrong (`label` is how the caller
    calls the parameters: `--with` on the command line)."""
    from jsonschema import Draft202012Validator

    from runbook.format.problems import did_you_mean

    known = list(schema.get("properties", {}))
    for error in Draft202012Validator(schema).iter_errors(params):
        if error.validator == "additionalProperties":
            bad = next(k for k in params if k not in known)
            raise ValueError(f"{label} {bad}: check {ctype!r} has no parameter {bad!r}"
                             f"{did_you_mean(bad, known)} (its parameters: {', '.join(known)})")
        where = ".".join(map(str, error.absolute_path)) or "(parameters)"
        raise ValueError(f"{label} {where}: {error.message}")


def check_report(ctype: str, params: dict[str, Any], answers: list[Answer]) -> dict[str, Any]:
    return {"schema": REPORT_SCHEMA, "check": ctype, "with": params, "nodes": answers}


def ask_all(transport: Transport, nodes: list[Node], request: dict[str, Any], timeout: float,
            forks: int, on_answer: Callable[[Answer], None] | None = None) -> tuple[list[Answer], bool]:
    """Every node's answer, in node order, and whether Ctrl-C stopped the asking. The nodes
    that had not answered by then are `timeout` with the reason `interrupted`. `on_answer`
    hears each answer as it lands (progress)."""
    pool = ThreadPoolExecutor(max_workers=max(1, min(forks, len(nodes))))
    answers: dict[str, Answer] = {}
    interrupted = False
    try:
        futures = {pool.submit(_ask, transport, n, request, timeout): n for n in nodes}
        for future in as_completed(futures):
            answers[futures[future].name] = future.result()
            if on_answer is not None:
                on_answer(answers[futures[future].name])
    except KeyboardInterrupt:
        interrupted = True
    finally:
        transport.close()  # on Ctrl-C: stops the probes still running on the nodes
        pool.shutdown(wait=not interrupted, cancel_futures=True)
    return [answers.get(n.name) or {"node": n.name, "status": "timeout", "result": None,
                                    "error": "interrupted", "duration_s": 0.0}
            for n in nodes], interrupted


def _ask(transport: Transport, node: Node, request: dict[str, Any], timeout: float) -> Answer:
    start = time.monotonic()
    answer = transport.run_check(node, request, timeout)
    return {"node": node.name, "status": answer.status, "result": answer.result,
            "error": answer.error, "duration_s": round(time.monotonic() - start, 3)}


def render_text(report: dict[str, Any]) -> str:
    """The document as `runbook check` prints it: each node's status, then its result's fields."""
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
