"""A `runbook-report/v1` document in a few lines: the job's findings, what each group of nodes
concluded (with its finding and what became of its fixes), and the exit code. For a chat (the MCP
server's run_runbook), where the whole document travels beside it as structured data."""

from __future__ import annotations

from typing import Any

from runbook.report.text import UI, exit_line, grouped_by_ending, incomplete_line, job_lines, sample_names


def brief(report: dict[str, Any]) -> str:
    lang = report.get("lang", "en")
    ui = UI[lang]
    rb = report["runbook"]
    lines = [f"{rb['id']} {rb['version']} · {rb['title']} · {len(report['nodes'])} "
             f"{ui['nodes'] if lang == 'zh' else 'node(s)'} · {report['duration_s']:.1f}s"]
    lines += job_lines(report, lang)
    if report["summary"].get("incomplete"):
        lines.append(incomplete_line(ui, report))
    first_of = {n["node"]: n for n in report["nodes"]}
    for _, _, names in grouped_by_ending(report["nodes"]):
        lines += _group(first_of[names[0]], sample_names(names, ui), ui)
    lines.append(exit_line(ui, report))
    return "\n".join(lines)


def _group(node: dict[str, Any], names: str, ui: dict[str, Any]) -> list[str]:
    """One group of nodes that ended alike, shown by its first node."""
    c = node.get("conclusion")
    if c is None:
        return [f"{names}: {ui['status'].get(node['status'], node['status'])}: {node.get('reason') or ''}"]
    out = [f"{names}: {c['title']} [{c['severity']}] ({c['runbook']}:{c['id']})"]
    if node.get("finding"):
        out.append(f"  ▸ {node['finding']}")
    if c["fixes"]:
        out.append(f"  {ui['fixes']}:")
    for fix in c["fixes"]:
        result = fix.get("result") or {}
        why = f": {result['reason']}" if result.get("reason") else ""
        out.append(f"    - {fix['title']} [{fix['effect']}; {result.get('status', 'dry-run')}{why}]")
    return out
