"""One runbook as plain text in one language: what `runbook show ID` prints, and what the MCP
server serves as the runbook's resource (`runbook://runbooks/ID/LANG`)."""

from __future__ import annotations

from runbook.format.model import Runbook


def runbook_outline(rb: Runbook, lang: str) -> str:
    """The whole tree as text: symptoms, parameters, steps and branches, conclusions and fixes."""
    t = lambda text: text.get(lang) if text else ""  # noqa: E731
    out = [f"{rb.id} {rb.version}: {t(rb.title)}", "", t(rb.summary), ""]
    if rb.symptoms:
        out.append("Symptoms / 症状:" if lang == "en" else "症状:")
        out.extend(f"  - {t(s)}" for s in rb.symptoms)
        out.append("")
    if rb.params:
        out.append("Params:" if lang == "en" else "参数:")
        for p in rb.params.values():
            flag = " (required)" if p.required else f" (default: {p.default!r})"
            out.append(f"  --set {p.name}=<{p.type}>{flag}  {t(p.help)}")
        out.append("")
    out.append(f"start: {rb.start}")
    for step in rb.steps.values():
        params = ", ".join(f"{k}={v!r}" for k, v in step.check.with_.items())
        timeout = f", timeout {step.check.timeout:g}s" if step.check.timeout else ""
        out.append(f"\n[{step.id}] {t(step.title)}")
        out.append(f"  check: {step.check.type}({params}){timeout}")
        for b in step.branches:
            note = f"  # {t(b.note)}" if b.note else ""
            out.append(f"  when {b.when} → {b.goto}{note}")
        if step.default:
            out.append(f"  otherwise → {step.default}")
    for c in rb.conclusions.values():
        out.append(f"\n({c.id}) [{c.severity}] {t(c.title)}  {', '.join(c.taxonomy)}")
        for line in t(c.explanation).strip().splitlines():
            out.append(f"  {line}")
        for f in c.fixes:
            out.append(f"  fix [{f.effect}]: {t(f.title)}")
            if f.run:
                out.extend(f"    $ {line}" for line in f.run.strip().splitlines())
    return "\n".join(out) + "\n"
