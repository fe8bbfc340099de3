"""Acting on a diagnosis: which fixes may run, running them on their nodes, and the audit log.

A fix's command (rendered per node by the walk, parameters shell-quoted) runs on the node
through the same transport as the checks, as the `command` check. What may run:

    dry run (default)    nothing; the report shows each command as it would run on each node
    --apply              read-only and changes-state fixes, after one confirmation on a terminal
    --apply --yes        also disruptive ones, without asking; never without a terminal
    FixPolicy.effects    narrows that further: `runbook mcp` runs nothing, or with
                         --allow-read-only-fixes read-only ones; a run started by an alert
                         read-only ones at most, whatever else it is told

The first node runs alone (a canary); after a failed fix, no fix starts on another node
unless `keep_going`. Every executed fix is appended to the audit log (JSON lines), with secrets
in its command hidden by the policy's redactor (the run's `Redactor.for_params` hides the values
of secret-named parameters too), and the policy's `context` (the alert that started the run).
`run.audit.append_audit` writes each entry; the alert receiver records each of its runs with it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runbook.format import expr
from runbook.format.model import EFFECTS
from runbook.library.runbooks import Library
from runbook.run.audit import append_audit
from runbook.run.redact import Redactor
from runbook.run.walk import NodeOutcome
from runbook.transports import Transport

SAFE_EFFECTS = ("read-only", "changes-state")
FIX_TIMEOUT_S = 120.0


@dataclass
class FixPolicy:
    apply: bool = False
    yes: bool = False
    interactive: bool = False  # a person at a terminal can be asked
    max_nodes: int | None = None
    keep_going: bool = False
    audit_log: Path | None = None
    redactor: Redactor = field(default_factory=Redactor)  # what the audit log hides
    # The effects this caller may apply at all, and why the others wait: runbook mcp and the
    # alert receiver allow read-only ones at most (nothing they start changes state).
    effects: tuple[str, ...] = EFFECTS
    not_allowed: str = ""
    context: dict[str, Any] = field(default_factory=dict)  # added to every audit entry

    def allows(self, effect: str) -> bool:
        if not self.apply or effect not in self.effects:
            return False
        if effect == "disruptive":
            return self.yes and self.interactive
        return True


@dataclass
class PlannedFix:
    outcome: NodeOutcome
    index: int  # position in the conclusion's fixes
    title: str
    command: str
    effect: str
    verify: dict[str, Any] | None
    result: dict[str, Any] = field(default_factory=dict)  # what the report shows


class FixRefused(Exception):
    """The run must not act at all (blast radius); the message says why."""


def plan(outcomes: list[NodeOutcome], policy: FixPolicy, lang: str) -> list[PlannedFix]:
    """Every fix with a command on every concluded node, marked as it would be handled."""
    planned = []
    for outcome in outcomes:
        conclusion = outcome.conclusion
        if conclusion is None:
            continue
        for i, fix in enumerate(conclusion.fixes):
            command = outcome.fix_commands[i] if i < len(outcome.fix_commands) else None
            if not command or command.startswith("# cannot render"):
                continue
            verify = outcome.fix_verifies[i] if i < len(outcome.fix_verifies) else None
            item = PlannedFix(outcome, i, fix.title.get(lang), command, fix.effect, verify)
            item.result = {"status": "dry-run"} if not policy.apply else (
                {"status": "held-back", "reason": "a value it needs is missing on this node (<unset>)"}
                if expr.UNSET_WORD in command else
                {"status": "pending"} if policy.allows(fix.effect) else
                {"status": "held-back", "reason": _held_back_reason(fix.effect, policy)})
            planned.append(item)
    return planned


def _held_back_reason(effect: str, policy: FixPolicy) -> str:
    if effect not in policy.effects:
        return f"{effect}: {policy.not_allowed or 'not allowed here'}"
    if effect == "disruptive" and not policy.interactive:
        return "disruptive: never run without a terminal"
    return "disruptive: needs --yes"


def check_blast_radius(planned: list[PlannedFix], policy: FixPolicy) -> None:
    nodes = sorted({p.outcome.node.name for p in planned if p.result["status"] == "pending"})
    if policy.max_nodes is not None and len(nodes) > policy.max_nodes:
        raise FixRefused(f"fixes would touch {len(nodes)} nodes, more than --max-nodes "
                         f"{policy.max_nodes}; nothing was run (raise the cap or narrow --nodes)")


def mark_pending(planned: list[PlannedFix], status: str, reason: str) -> None:
    """Every fix still pending ends as `status` (refused, skipped) with `reason`: nothing ran it."""
    for item in planned:
        if item.result["status"] == "pending":
            item.result = {"status": status, "reason": reason}


def confirmation_text(planned: list[PlannedFix]) -> str:
    """What a person approves: every node and the exact command it will run."""
    lines = []
    for p in planned:
        if p.result["status"] == "pending":
            lines.append(f"  {p.outcome.node.name}: [{p.effect}] {p.title}")
            lines.extend(f"      $ {line}" for line in p.command.strip().splitlines())
    return "\n".join(lines)


def execute(planned: list[PlannedFix], transport: Transport, library: Library,
            policy: FixPolicy, forks: int = 32,
            on_result: Callable[[PlannedFix], None] | None = None) -> None:
    """Run the pending fixes node by node (each node's fixes in order); fills `result`."""
    by_node: dict[str, list[PlannedFix]] = {}
    for p in planned:
        if p.result["status"] == "pending":
            by_node.setdefault(p.outcome.node.name, []).append(p)
    names = list(by_node)
    failed: list[str] = []

    def run_node(name: str) -> bool:
        ok = True
        for item in by_node[name]:
            if not ok:
                item.result = {"status": "skipped", "reason": "an earlier fix on this node failed"}
                continue
            # A read-only fix that fails (a grep finding nothing) changed nothing: go on.
            ok = _run_one(item, transport, library) or item.effect == "read-only"
            _audit(item, policy)
            if on_result:
                on_result(item)
        return ok

    # A canary first: one node alone, then the rest in parallel, stopping on failure.
    waves = [names[:1], names[1:]] if names else []
    pool = ThreadPoolExecutor(max_workers=max(1, min(forks, len(names) or 1)))
    try:
        for wave in waves:
            if failed and not policy.keep_going:
                for name in wave:
                    for item in by_node[name]:
                        item.result = {"status": "skipped",
                                       "reason": f"a fix failed on {failed[0]} (use --keep-going)"}
                continue
            for name, ok in zip(wave, pool.map(run_node, wave), strict=True):
                if not ok:
                    failed.append(name)
    finally:
        # On Ctrl-C, don't wait here for the fixes still running: the caller closes the
        # transport, which stops them on their nodes.
        pool.shutdown(wait=False, cancel_futures=True)


def _run_one(item: PlannedFix, transport: Transport, library: Library) -> bool:
    begin = time.monotonic()
    request = {"check": "command", "with": {"run": item.command},
               "step": f"fix:{item.outcome.conclusion.id if item.outcome.conclusion else ''}:{item.index}"}
    answer = transport.run_check(item.outcome.node, request, FIX_TIMEOUT_S)
    result: dict[str, Any] = {"duration_s": round(time.monotonic() - begin, 3)}
    if answer.status != "ok" or answer.result is None:
        result.update(status="failed", reason=answer.error or answer.status)
        item.result = result
        return False
    out = answer.result
    result.update(exit_code=out.get("exit_code"), stdout=out.get("stdout", ""),
                  stderr=out.get("stderr", ""))
    ok = bool(out.get("ok")) and not out.get("timed_out")
    result["status"] = "ok" if ok else "failed"
    if out.get("timed_out"):
        result["reason"] = "timed out"
    if ok and item.verify is not None:
        result["verify"] = _verify(item, transport, library)
        if not result["verify"]["passed"]:
            result["status"], ok = "failed", False
            result["reason"] = "the check after the fix did not pass"
    item.result = result
    return ok


def _verify(item: PlannedFix, transport: Transport, library: Library) -> dict[str, Any]:
    verify = item.verify or {}
    if "__error__" in verify.get("with", {}):
        return {"passed": False, "error": verify["with"]["__error__"]}
    request = {"check": verify["check"], "with": verify["with"], "step": "fix:verify"}
    answer = transport.run_check(item.outcome.node, request, float(verify["timeout"]))
    if answer.status != "ok" or answer.result is None:
        return {"passed": False, "check": verify["check"], "error": answer.error or answer.status}
    runbook = item.outcome.conclusion_runbook
    conclusion = item.outcome.conclusion
    assert runbook is not None and conclusion is not None
    condition = library.by_id[runbook.id].compiled.fix_verify_passes[(conclusion.id, item.index)]
    passed = expr.truthy(condition.evaluate({"result": answer.result, "params": verify.get("params", {}),
                                             "node": verify.get("node", {}), "steps": {}, "cluster": []}))
    return {"passed": passed, "check": verify["check"], "result": answer.result}


def _audit(item: PlannedFix, policy: FixPolicy) -> None:
    runbook = item.outcome.conclusion_runbook
    append_audit(policy.audit_log, {
        **policy.context,
        "node": item.outcome.node.name,
        "runbook": runbook.id if runbook else None, "version": runbook.version if runbook else None,
        "conclusion": item.outcome.conclusion.id if item.outcome.conclusion else None,
        "fix": item.title, "effect": item.effect, "command": item.command,
        "status": item.result.get("status"), "exit_code": item.result.get("exit_code"),
        "verify_passed": (item.result.get("verify") or {}).get("passed"),
    }, policy.redactor)


def node_results(planned: list[PlannedFix]) -> dict[tuple[str, int], dict[str, Any]]:
    """(node name, fix index) -> what happened, for the report."""
    return {(p.outcome.node.name, p.index): p.result for p in planned}


