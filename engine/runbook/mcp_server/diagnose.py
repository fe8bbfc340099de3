"""run_runbook and check: a runbook walked on nodes, or one check ad hoc, through the engine
functions `runbook run` and `runbook check` call (run/walk.py, run/adhoc.py, report/build.py).
Fixes are shown, never applied, unless the call asks and the server allows read-only ones."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from runbook.library.lazy import open_library
from runbook.library.runbooks import Library
from runbook.mcp_server.answer import Answer, ToolInputError
from runbook.mcp_server.catalog import find_runbook
from runbook.mcp_server.progress import NodeCounter, Report
from runbook.mcp_server.safety import ServerOptions, bounded_timeout, fix_policy, refuse_code
from runbook.mcp_server.targets import FORKS, Where, reach
from runbook.report.brief import brief
from runbook.report.build import build_report
from runbook.run import fixes
from runbook.run.adhoc import ask_all, check_module, check_report, render_text, validate
from runbook.run.params import ParamError, parse_sets
from runbook.run.redact import Redactor
from runbook.run.targets import default_log, transports_from_args
from runbook.run.walk import NodeOutcome, Walk, WalkOptions
from runbook.transports import Transport


@dataclass
class RunRequest:
    """One run_runbook call."""

    runbook: str
    where: Where = field(default_factory=Where)
    sets: dict[str, Any] = field(default_factory=dict)
    timeout_s: float | None = None
    apply_read_only_fixes: bool = False
    lang: str = "en"


def run_runbook(request: RunRequest, options: ServerOptions, report: Report | None = None) -> Answer:
    """The runbook-report/v1 document and its brief."""
    library = open_library()
    runbook = find_runbook(request.runbook, library)
    params = typed_params(runbook, request.sets)
    deadline = bounded_timeout(request.timeout_s, options)
    args, nodes = reach(request.where, options)
    default_log(args, params, runbook.params)
    started, clock = datetime.now(timezone.utc), time.monotonic()
    transport = transports_from_args(args)
    try:
        walk = Walk(library, runbook, nodes, transport, params, WalkOptions(forks=FORKS, deadline_s=deadline),
                    [NodeCounter(len(nodes), report)])
        outcomes = walk.run()
        policy = fix_policy(options, request.apply_read_only_fixes, params)
        fix_results = act_on_fixes(outcomes, transport, library, policy, request.lang)
    finally:
        transport.close()
    doc = build_report(runbook, outcomes, started.strftime("%Y-%m-%dT%H:%M:%SZ"), time.monotonic() - clock,
                       request.lang, params, fix_results, job_verdicts=walk.job_verdicts)
    return Answer(doc, brief(doc))


def typed_params(runbook: Any, sets: dict[str, Any]) -> dict[str, Any]:
    """`set` as `runbook run --set NAME=VALUE` reads it: typed, checked, paths made absolute."""
    refuse_code("set", sets)
    try:
        return parse_sets(runbook, [f"{name}={_text(value)}" for name, value in sets.items()])
    except ParamError as exc:  # its messages name `--set NAME`: here the argument is `set`
        raise ToolInputError(str(exc).replace("--set ", "set ")) from None


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def act_on_fixes(outcomes: list[NodeOutcome], transport: Transport, library: Library,
                 policy: fixes.FixPolicy, lang: str) -> dict[Any, Any]:
    """Plan every fix; run the ones the policy allows (never past the blast-radius cap)."""
    planned = fixes.plan(outcomes, policy, lang)
    if policy.apply:
        try:
            fixes.check_blast_radius(planned, policy)
            fixes.execute(planned, transport, library, policy, forks=FORKS)
        except fixes.FixRefused as exc:
            fixes.mark_pending(planned, "refused", str(exc))
    return fixes.node_results(planned)


def check(check_type: str, params: dict[str, Any], where: Where, timeout_s: float | None,
          options: ServerOptions, lang: str = "en", report: Report | None = None) -> Answer:
    """The runbook-check/v1 document (secrets redacted) and its text."""
    refuse_code("params", params, check_type)
    try:
        module = check_module(check_type)
    except ValueError as exc:
        raise ToolInputError(f"check_type: {exc}") from None
    try:
        validate(check_type, module.PARAMS, params, label="params:")
    except ValueError as exc:
        raise ToolInputError(str(exc)) from None
    timeout = bounded_timeout(timeout_s if timeout_s is not None else float(module.DEFAULT_TIMEOUT), options)
    args, nodes = reach(where, options)
    counter = NodeCounter(len(nodes), report)
    request = {"check": check_type, "with": params, "step": f"check:{check_type}"}
    answers, _ = ask_all(transports_from_args(args), nodes, request, timeout, FORKS,
                         on_answer=lambda answer: counter.node_done(answer["node"], answer["status"]))
    doc = Redactor().data(check_report(check_type, params, answers))
    return Answer(doc, f"{_headline(check_type, answers, lang)}\n{render_text(doc).rstrip()}")


def _headline(check_type: str, answers: list[dict[str, Any]], lang: str) -> str:
    answered = sum(a["status"] == "ok" and not (a["result"] or {}).get("timed_out") for a in answers)
    failed = len(answers) - answered
    if lang == "zh":
        return f"在 {len(answers)} 个节点上运行检查 {check_type}：{answered} 个有结果，{failed} 个失败或超时"
    return f"check {check_type} on {len(answers)} node(s): {answered} answered, {failed} failed or timed out"
