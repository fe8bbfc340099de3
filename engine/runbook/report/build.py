"""Build the `runbook-report/v1` document from a walk's outcomes."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from runbook.format.model import Runbook
from runbook.report.text import SAMPLE, grouped_by_ending
from runbook.run.redact import Redactor
from runbook.run.walk import CONCLUDED, NodeOutcome

SCHEMA = "runbook-report/v1"
PROBLEM_SEVERITIES = ("warning", "critical")


def exit_code(nodes: list[dict[str, Any]], jobs: list[dict[str, Any]] | None = None) -> int:
    """0 nothing found; 1 a warning/critical conclusion, or a job-level verdict that is a problem
    (even when every node alone looks fine); 3 a node undiagnosed and no problem."""
    if any((n.get("conclusion") or {}).get("severity") in PROBLEM_SEVERITIES for n in nodes):
        return 1
    if any(job.get("problem") for job in jobs or []):
        return 1
    if any(n["status"] != CONCLUDED for n in nodes):
        return 3
    return 0


FixResults = dict[tuple[str, int], dict[str, Any]]  # (node, fix index) -> what happened


def job_entry(verdict: Any, lang: str) -> dict[str, Any]:
    """One job-level verdict for the report's summary: what the analysis of a step found."""
    result = verdict.result
    finding = result.get("finding") or {}
    return {"step": verdict.step, "analysis": result.get("analysis"), "verdict": result.get("verdict"),
            "problem": bool(result.get("problem")), "taxonomy": list(result.get("taxonomy") or []),
            "finding": finding.get(lang) or finding.get("en") or "",
            "ranks": list(result.get("ranks") or []), "hosts": list(result.get("hosts") or []),
            "suspects": sorted(n for n, part in (result.get("nodes") or {}).items() if part.get("suspect"))}


class SharedConclusions:
    """One conclusion entry for the nodes of a report that reached the same conclusion with the
    same commands (the walk gives such nodes one list of them) and no fix results of their own."""

    def __init__(self, fix_results: FixResults | None) -> None:
        self.with_results = {node for node, _ in fix_results or {}}
        self.entries: dict[tuple[int, int, int], tuple[Any, dict[str, Any] | None]] = {}

    def entry(self, outcome: NodeOutcome, lang: str, fix_results: FixResults | None) -> dict[str, Any] | None:
        if outcome.conclusion is None or outcome.node.name in self.with_results:
            return conclusion_entry(outcome, lang, fix_results)
        key = (id(outcome.conclusion), id(outcome.conclusion_runbook), id(outcome.fix_commands))
        known = self.entries.get(key)
        if known is None:  # the commands are held in the value: their id is not reused meanwhile
            known = self.entries[key] = (outcome.fix_commands, conclusion_entry(outcome, lang))
        return known[1]


def node_entry(outcome: NodeOutcome, lang: str, fix_results: FixResults | None = None,
               shared: SharedConclusions | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"node": outcome.node.name, "status": outcome.status,
                             "path": list(outcome.path)}
    finding = finding_text(outcome, lang)
    if finding is not None:
        entry["finding"] = finding
    entry["conclusion"] = (conclusion_entry(outcome, lang, fix_results) if shared is None
                           else shared.entry(outcome, lang, fix_results))
    findings = job_findings(outcome, lang)
    if findings:
        entry["job_findings"] = findings
    if outcome.reason:
        entry["reason"] = outcome.reason
    entry["evidence"] = [evidence_item(e) for e in outcome.evidence]
    return entry


def finding_text(outcome: NodeOutcome, lang: str) -> str | None:
    """The conclusion's finding in `lang` (else the first language it has); None without one."""
    if not outcome.finding:
        return None
    return outcome.finding.get(lang) or next(iter(outcome.finding.values()))


def conclusion_entry(outcome: NodeOutcome, lang: str,
                     fix_results: FixResults | None = None) -> dict[str, Any] | None:
    """The node's conclusion as the report holds it, its fixes' commands rendered for the node."""
    if outcome.conclusion is None:
        return None
    c, rb = outcome.conclusion, outcome.conclusion_runbook
    return {
        "id": c.id,
        "runbook": rb.id if rb else None,
        "severity": c.severity, "taxonomy": list(c.taxonomy), "title": c.title.get(lang),
        "basis": c.basis, "generic": c.generic,
        "explanation": c.explanation.get(lang),
        "fixes": [{"title": f.title.get(lang), "body": f.body.get(lang) if f.body else None,
                   "run": cmd, "effect": f.effect,
                   **({"result": fix_results[(outcome.node.name, i)]}
                      if fix_results and (outcome.node.name, i) in fix_results else {})}
                  for i, (f, cmd) in enumerate(zip(c.fixes, outcome.fix_commands
                                                   or [f.run for f in c.fixes], strict=True))],
        "see_also": list(c.see_also),
    }


def evidence_item(e: Any) -> dict[str, Any]:
    """One step's evidence as the report holds it."""
    return {"step": e.step, "check": e.check, "result": e.result, "duration_s": e.duration_s,
            "goto": e.goto, "when": e.when, "decided_by": e.decided_by,
            **({"notes": e.notes} if e.notes else {})}


def job_findings(outcome: NodeOutcome, lang: str) -> list[dict[str, Any]]:
    """What the job-level analyses on this node's path found that concerns it: every verdict that
    is a problem for the job, or names this node. Added to the node's own conclusion, never in
    place of it."""
    out = []
    for step, job in outcome.jobs.items():
        suspect = bool((job.get("node") or {}).get("suspect"))
        if not (job.get("problem") or suspect):
            continue
        finding = job.get("finding") or {}
        out.append({"step": step, "analysis": job.get("analysis"), "verdict": job.get("verdict"),
                    "finding": finding.get(lang) or finding.get("en") or "", "suspect": suspect})
    return out


def conclusion_groups(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """summary.conclusions: each way the nodes ended with its count and a sample of nodes."""
    return [{"id": what, "severity": severity, "count": len(names), "sample": names[:SAMPLE]}
            for what, severity, names in grouped_by_ending(nodes)]


def build_report(runbook: Runbook, outcomes: list[NodeOutcome], started_at: str,
                 duration_s: float, lang: str, params: dict[str, Any],
                 fix_results: FixResults | None = None, incomplete: str | None = None,
                 job_verdicts: list[Any] | None = None) -> dict[str, Any]:
    """The report; `incomplete` is why the run stopped early (e.g. "interrupted (Ctrl-C)"):
    `summary.incomplete` is then true and `summary.reason` says why. Secrets (secret-named
    params and env values, credential-shaped text) are redacted here, so every format, and the
    bundle that copies the report, is clean."""
    shared = SharedConclusions(fix_results)
    nodes = [node_entry(o, lang, fix_results, shared) for o in outcomes]
    jobs = [job_entry(v, lang) for v in job_verdicts or []]
    by_conclusion: dict[str, list[str]] = defaultdict(list)
    by_status: dict[str, list[str]] = defaultdict(list)
    for n in nodes:
        if n["conclusion"]:
            by_conclusion[n["conclusion"]["id"]].append(n["node"])
        by_status[n["status"]].append(n["node"])
    report = {
        "schema": SCHEMA,
        "runbook": {"id": runbook.id, "version": runbook.version, "digest": runbook.digest,
                    "title": runbook.title.get(lang)},
        "started_at": started_at,
        "duration_s": round(duration_s, 3),
        "lang": lang,
        "params": params,
        "nodes": nodes,
        "summary": {"exit_code": exit_code(nodes, jobs), "by_conclusion": dict(by_conclusion),
                    "conclusions": conclusion_groups(nodes), "job": jobs,
                    "by_status": dict(by_status), "incomplete": incomplete is not None,
                    **({"reason": incomplete} if incomplete else {})},
    }
    return Redactor.for_params(params).data(report)
