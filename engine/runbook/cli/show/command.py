"""`runbook show ID`: the whole tree in one language, or as JSON."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from runbook.format.model import Runbook
from runbook.i18n.textwidth import pad
from runbook.library.checkdocs import CheckDoc


def run(args: argparse.Namespace) -> int:
    from runbook.cli.resolve import find_runbook

    if args.id == "checks" or args.id.startswith("check:"):
        return show_checks(args)
    runbook = find_runbook(args.id)
    if runbook is None:
        return 2
    if args.format == "json":
        print(json.dumps(dataclasses.asdict(runbook), ensure_ascii=False, indent=2))
        return 0
    sys.stdout.write(render(runbook, args.lang))
    return 0


def render(rb: Runbook, lang: str) -> str:
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


def show_checks(args: argparse.Namespace) -> int:
    """`show checks` lists every check type; `show check:TYPE` its parameters and results."""
    from runbook.checks import CHECK_TYPES
    from runbook.format.problems import did_you_mean
    from runbook.library.checkdocs import describe, describe_all

    name = args.id.partition(":")[2]
    if name and name not in CHECK_TYPES:
        print(f"runbook: no check type {name!r}{did_you_mean(name, CHECK_TYPES)}", file=sys.stderr)
        return 2
    docs = [describe(name)] if name else describe_all()
    if args.format == "json":
        print(json.dumps([dataclasses.asdict(d) for d in docs], ensure_ascii=False, indent=2))
    elif name:
        sys.stdout.write(render_check_doc(docs[0], args.lang))
    else:
        for doc in docs:
            print(f"{doc.name:<12} {doc.summary.get(args.lang, doc.summary['en'])}")
    return 0


def render_check_doc(doc: CheckDoc, lang: str) -> str:
    """`show check:TYPE` as text: its parameters and its result fields, in columns."""
    out = [f"check {doc.name}: {doc.summary.get(lang, doc.summary['en'])}",
           f"  default timeout: {doc.default_timeout:g}s", "",
           "  parameters (with:):" if lang == "en" else "  参数（with:）:"]
    for p in doc.params:
        flag = "required" if p.required else f"default {p.default!r}"
        out.append(f"    {pad(p.name, 18)}{pad(p.type, 22)}{flag}  {p.description}")
    if not doc.params:
        out.append("    (none)")
    out += ["", "  result fields:" if lang == "en" else "  结果字段:"]
    for field, info in doc.results.items():
        out.append(f"    {pad(field, 22)}{pad(str(info.get('type', '')), 10)}"
                   f"{info.get(lang) or info.get('en', '')}")
    return "\n".join(out) + "\n"
