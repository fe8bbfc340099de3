"""`--format text`: live progress per node on stderr, then nodes grouped by conclusion."""

from __future__ import annotations

import json
import sys
import textwrap
from typing import Any, TextIO

from runbook.i18n.textwidth import pad

UI = {
    "en": {
        "node": "node", "nodes": "nodes", "path": "Path", "conclusion": "Conclusion",
        "fixes": "Fixes", "reason": "Reason", "summary": "Summary", "when": "when",
        "default": "otherwise (no condition held)", "see_also": "See also",
        "exit": {0: "no problem found", 1: "a problem was found", 3: "some nodes could not be "
                 "diagnosed"},
        "status": {"concluded": "concluded", "unreachable": "unreachable", "timeout": "timed out",
                   "error": "error"},
        "incomplete": "INCOMPLETE: {reason}; the nodes still being checked are marked timed out",
        "so_far": "so far", "interrupted": "interrupted",
        "more": "+{n} more", "count": "count", "sample": "e.g.",
        "more_nodes": "... and {n} more nodes (every node is in --format json)",
    },
    "zh": {
        "node": "节点", "nodes": "个节点", "path": "诊断路径", "conclusion": "结论",
        "fixes": "修复方法", "reason": "原因", "summary": "汇总", "when": "条件",
        "default": "否则（没有条件成立）", "see_also": "另见",
        "exit": {0: "未发现问题", 1: "发现问题", 3: "部分节点无法诊断"},
        "status": {"concluded": "已得出结论", "unreachable": "无法连接", "timeout": "超时",
                   "error": "出错"},
        "incomplete": "报告不完整：{reason}；仍在检查中的节点标记为超时",
        "so_far": "目前", "interrupted": "已中断",
        "more": "另 {n} 个", "count": "数量", "sample": "例如",
        "more_nodes": "……另有 {n} 个节点（每个节点都在 --format json 中）",
    },
}
# Past this many nodes the summary lists conclusions with counts and samples, not every node;
# lists of names, findings and per-node commands stop after SAMPLE entries.
SUMMARY_PER_NODE_MAX = 64
SAMPLE = 8
NAMES_WIDTH = 160  # a group's heading shows at most this many characters of node names
# Problems first: a node that could not be diagnosed comes between the warnings and the rest.
URGENCY = {"critical": 0, "warning": 1, "info": 3, "ok": 4}
UNDIAGNOSED = 2
MARK = {"ok": "✔", "info": "ℹ", "warning": "▲", "critical": "✖"}
COLOR = {"ok": "32", "info": "36", "warning": "33", "critical": "31"}


class TextReporter:
    def __init__(self, lang: str = "en", progress: TextIO | None = None,
                 color: bool = False, **_: Any) -> None:
        self.lang, self.progress, self.color = lang, progress, color
        self.ui = UI[lang]

    # -- live progress --

    def on_step(self, outcome: Any, evidence: Any) -> None:
        if self.progress is None:
            return
        flag = " ⏱" if evidence.result.get("timed_out") else ""
        print(f"  {pad(outcome.node.name, 16)} {evidence.step} ({evidence.check}, "
              f"{evidence.duration_s:.2f}s){flag} → {evidence.goto or '·'}", file=self.progress)

    def on_node_done(self, outcome: Any) -> None:
        if self.progress is None:
            return
        what = outcome.conclusion.id if outcome.conclusion else outcome.status
        print(f"  {pad(outcome.node.name, 16)} ■ {what}", file=self.progress)

    # -- final report --

    def _paint(self, text: str, severity: str) -> str:
        return f"\x1b[{COLOR.get(severity, '0')}m{text}\x1b[0m" if self.color else text

    def render(self, report: dict[str, Any]) -> str:
        rb = report["runbook"]
        lines = [f"runbook {rb['id']} {rb['version']} · {rb['title']} · "
                 f"{len(report['nodes'])} {self.ui['nodes'] if self.lang == 'zh' else 'node(s)'}"
                 f" · {report['duration_s']:.2f}s", ""]
        if report["summary"].get("incomplete"):
            lines[1:1] = [self._paint(incomplete_line(self.ui, report), "warning")]
        lines[0:0] = [self._paint(line, "critical") for line in job_lines(report, self.lang)]
        for group in _groups(report["nodes"]):
            lines.extend(self._group(group))
            lines.append("")
        lines.extend(self._summary(report))
        return "\n".join(lines) + "\n"

    def _group(self, nodes: list[dict[str, Any]]) -> list[str]:
        first = nodes[0]
        names = sample_names([n["node"] for n in nodes], self.ui)
        c = first.get("conclusion")
        severity = c["severity"] if c else "critical"
        head = (f"{MARK[severity]} {c['title']}  [{c['severity']} · {', '.join(c['taxonomy']) or '-'}]"
                if c else f"✖ {self.ui['status'].get(first['status'], first['status'])}")
        out = [self._paint(f"{names}: {head}", severity)]
        findings = sorted({n["finding"] for n in nodes if n.get("finding")})
        out.extend(f"  ▸ {finding}" for finding in findings[:SAMPLE])
        if len(findings) > SAMPLE:
            out.append("  ▸ " + self.ui["more"].format(n=len(findings) - SAMPLE))
        out.append(f"  {self.ui['path']}:")
        for i, ev in enumerate(first["evidence"], 1):
            timed = " ⏱ timed out" if ev["result"].get("timed_out") else ""
            out.append(f"    {i}. {ev['step']} ({ev['check']}, {ev['duration_s']:.2f}s){timed}"
                       f" → {ev['goto'] or '·'}")
            out.append(f"       {self._decision(ev)}")
        if first.get("reason"):
            out.append(f"  {self.ui['reason']}: {first['reason']}")
        if c:
            out.append(f"  {self.ui['conclusion']}: {c['id']}")
            out.extend("    " + line for line in _wrap(c["explanation"]))
            if c["fixes"]:
                out.append(f"  {self.ui['fixes']}:")
            for i, fix in enumerate(c["fixes"], 1):
                out.append(f"    {i}. {fix['title']}  [{fix['effect']}]")
                if fix.get("body"):
                    out.extend("       " + line for line in _wrap(fix["body"], 86))
                if fix.get("run"):
                    out.extend(self._fix_commands(nodes, i - 1))
            if c.get("see_also"):
                out.append(f"  {self.ui['see_also']}: {', '.join(c['see_also'])}")
        return out

    def _fix_commands(self, nodes: list[dict[str, Any]], index: int) -> list[str]:
        """The command as it runs on each node (once when all agree), and what became of it."""
        fixes = [(n["node"], n["conclusion"]["fixes"][index]) for n in nodes]
        commands = {fix.get("run") for _, fix in fixes}
        out: list[str] = []
        if len(commands) == 1:
            out.extend(f"       $ {line}" for line in (fixes[0][1].get("run") or "").strip().splitlines())
        else:
            for name, fix in fixes[:SAMPLE]:
                out.append(f"       {name}:")
                out.extend(f"         $ {line}" for line in (fix.get("run") or "").strip().splitlines())
            if len(fixes) > SAMPLE:
                out.append("       " + self.ui["more_nodes"].format(n=len(fixes) - SAMPLE))
        by_status: dict[str, list[str]] = {}
        for name, fix in fixes:
            result = fix.get("result") or {}
            status = result.get("status")
            if status and status != "dry-run":
                detail = status + (f" (exit {result['exit_code']})" if result.get("exit_code") is not None
                                   else "") + (f": {result['reason']}" if result.get("reason") else "")
                by_status.setdefault(detail, []).append(name)
        for detail, names in by_status.items():
            out.append(f"       → {detail}: {sample_names(names, self.ui)}")
        return out

    def _decision(self, ev: dict[str, Any]) -> str:
        when = ev.get("when")
        shown = self.ui["default"] if when is None else f"{self.ui['when']} {when}"
        values = ", ".join(f"{k}={_value(v)}" for k, v in ev.get("decided_by", {}).items())
        return shown + (f"  ·  {values}" if values else "")

    def _summary(self, report: dict[str, Any]) -> list[str]:
        if len(report["nodes"]) > SUMMARY_PER_NODE_MAX:
            return [f"{self.ui['summary']}:", *self._summary_by_conclusion(report),
                    exit_line(self.ui, report)]
        out = [f"{self.ui['summary']}:"]
        rows: list[tuple[str, str, str]] = []
        for n in report["nodes"]:
            c = n.get("conclusion")
            rows.append((n["node"], c["id"] if c else self.ui["status"].get(n["status"], ""),
                         c["severity"] if c else n["status"]))
        width = max((len(r[0]) for r in rows), default=4) + 2
        for name, what, sev in rows:
            out.append(f"  {pad(name, width)}{pad(what, 34)}{sev}")
        out.append(exit_line(self.ui, report))
        return out

    def _summary_by_conclusion(self, report: dict[str, Any]) -> list[str]:
        """One row per conclusion (or way of failing): how many nodes, and some of them."""
        out = [f"  {pad(self.ui['conclusion'], 34)}{pad('', 10)}{pad(self.ui['count'], 9)}"
               f"{self.ui['sample']}"]
        for what, severity, names in summary_groups(report, self.ui):
            out.append(f"  {pad(what, 34)}{pad(severity, 10)}{pad(str(len(names)), 9)}"
                       f"{sample_names(names, self.ui)}")
        return out


def grouped_by_ending(nodes: list[dict[str, Any]]) -> list[tuple[str, str, list[str]]]:
    """(conclusion id, severity, node names) per conclusion, and (status, status, names) for the
    nodes that reached none: problems first, then the biggest groups."""
    groups: dict[tuple[str, str], list[str]] = {}
    for n in nodes:
        c = n.get("conclusion")
        groups.setdefault((c["id"], c["severity"]) if c else (n["status"], n["status"]), []).append(n["node"])
    ordered = sorted(groups.items(), key=lambda g: (URGENCY.get(g[0][1], UNDIAGNOSED), -len(g[1]), g[0][0]))
    return [(what, severity, names) for (what, severity), names in ordered]


def summary_groups(report: dict[str, Any], ui: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    """(conclusion or status in the report's language, severity, node names), problems first."""
    return [(what if what != severity else ui["status"].get(what, what), severity, names)
            for what, severity, names in grouped_by_ending(report["nodes"])]


def sample_names(names: list[str], ui: dict[str, Any]) -> str:
    """The names folded (`gpu[01-16]`); past NAMES_WIDTH characters, the first SAMPLE of them
    folded and how many more, so one group of 100,000 nodes is one short line."""
    folded = compress(names)
    if len(folded) <= NAMES_WIDTH:
        return folded
    return f"{compress(names[:SAMPLE])} ({ui['more'].format(n=len(names) - SAMPLE)})"


def job_lines(report: dict[str, Any], lang: str) -> list[str]:
    """The job-level verdicts that are problems, one line each: what the whole job shows, before
    anything a node shows alone (`✖ JOB: rank 2 (gpu07, pid 3519) is in save_shard ...`)."""
    label = "作业" if lang == "zh" else "JOB"
    return [f"✖ {label}: {job['finding']}  [{', '.join(job['taxonomy']) or '-'}]"
            for job in report["summary"].get("job") or [] if job.get("problem")]


def _why_incomplete(ui: dict[str, Any], report: dict[str, Any]) -> str:
    """summary.reason (English in the JSON contract), in the report's language."""
    return str(report["summary"].get("reason", "")).replace("interrupted", ui["interrupted"], 1)


def incomplete_line(ui: dict[str, Any], report: dict[str, Any]) -> str:
    return "▲ " + ui["incomplete"].format(reason=_why_incomplete(ui, report))


def exit_line(ui: dict[str, Any], report: dict[str, Any]) -> str:
    """`exit 1: a problem was found`; an interrupted run exits 130 whatever it found so far."""
    code = report["summary"]["exit_code"]
    if report["summary"].get("incomplete"):
        return f"exit 130: {_why_incomplete(ui, report)}; {ui['so_far']}: {ui['exit'][code]}"
    return f"exit {code}: {ui['exit'][code]}"


def _groups(nodes: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Nodes that reached the same conclusion (or failed the same way) are shown once.

    Problems first, so the node that needs attention is at the top of the screen.
    """
    groups: dict[str, list[dict[str, Any]]] = {}
    for n in nodes:
        conclusion = (n.get("conclusion") or {}).get("id")
        key = json.dumps([n["status"], conclusion, n["path"], None if conclusion else n.get("reason")])
        groups.setdefault(key, []).append(n)
    return sorted(groups.values(), key=_urgency)


def _urgency(group: list[dict[str, Any]]) -> int:
    c = group[0].get("conclusion")
    return URGENCY[c["severity"]] if c else UNDIAGNOSED


def compress(names: list[str]) -> str:
    """`node01, node02, node03, node05` -> `node[01-03,05]` (Slurm hostlist notation)."""
    try:
        import hostlist

        return str(hostlist.collect_hostlist(names))
    except Exception:  # names hostlist cannot fold, e.g. with commas in them
        return ", ".join(names)


def _wrap(markdown: str, width: int = 88) -> list[str]:
    out: list[str] = []
    for para in markdown.strip().splitlines():
        out.extend(textwrap.wrap(para, width) or [""])
    return out


def _value(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def is_tty(stream: TextIO = sys.stdout) -> bool:
    return hasattr(stream, "isatty") and stream.isatty()
