"""`runbook show ID`: the whole tree in one language, or as JSON."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from runbook.i18n.textwidth import pad
from runbook.library.checkdocs import CheckDoc
from runbook.library.outline import runbook_outline


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
    sys.stdout.write(runbook_outline(runbook, args.lang))
    return 0


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
