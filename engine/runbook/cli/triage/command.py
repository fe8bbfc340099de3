"""`runbook triage LOG...`: the failures the logs show, causes first, with the lines that say so."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runbook.format.model import Runbook
    from runbook.triage.advice import Advice
    from runbook.triage.result import TriageResult
    from runbook.triage.verdict import Match

SHOWN_LINES = 3  # matched lines printed per match in text output
LINE_WIDTH = 150


def run(args: argparse.Namespace) -> int:
    from runbook.cli.library_warnings import warn_unloaded
    from runbook.library.kb import load_kb
    from runbook.library.lazy import open_library
    from runbook.triage.logstream import LogSourceError
    from runbook.triage.result import triage_sources
    from runbook.triage.sources import SourceError, expand_inputs

    try:
        sources = expand_inputs(args.logs)
    except SourceError as exc:
        print(f"runbook triage: {exc}", file=sys.stderr)
        return 2
    library = open_library()  # signatures from the index; a runbook is loaded when it matched
    warn_unloaded(library)
    try:
        result = triage_sources(library, load_kb(), sources,
                                on_warning=lambda m: print(f"runbook: warning: {m}", file=sys.stderr))
    except LogSourceError as exc:
        print(f"runbook triage: {exc}", file=sys.stderr)
        return 2
    result.matches = result.matches[: args.top]
    if args.format == "json":
        print(json.dumps(result.to_json(args.lang), ensure_ascii=False, indent=2))
    else:
        print_text(result, args.lang, library)
    return 0 if result.verdict != "no-error" else 1


def print_text(result: TriageResult, lang: str, library: object) -> None:
    zh = lang == "zh"
    names = ", ".join(s.path for s in result.sources[:3]) + (" ..." if len(result.sources) > 3 else "")
    print(f"{names}（{result.lines} 行）" if zh else f"{names} ({result.lines} lines)")
    print(result.summary(lang))
    for rank, match in enumerate(result.matches, 1):
        runbook = library.get(match.runbook) if match.runbook else None  # type: ignore[attr-defined]
        print()
        _print_match(rank, match, lang, runbook, many_files=len(result.sources) > 1)
    from runbook.triage.readings.spread import READING, describe  # loaded with the triage already

    # said already: by the summary (no-error), or by the matches that rest on them
    told = result.verdict == "no-error" or any(
        (m.reading or {}).get("reading") == READING for m in result.matches)
    if result.differences and not told:
        print()
        print(describe(result.differences, lang))
    if result.readings:
        _print_readings(result, lang, library)
    if result.advice is not None:
        print_advice(result.advice, lang)
    for note in result.notes:
        print(f"{'注' if zh else 'note'}: {note}")


def _print_readings(result: TriageResult, lang: str, library: object) -> None:
    """What the stack dumps and the numbers show (the no-error summary already says it) and the
    conclusions they point to that the matches above do not already name, with the runbook that
    confirms each on the nodes."""
    from runbook.triage.readings.series import HEALTHY
    from runbook.triage.readings.series import describe as describe_numbers

    zh = lang == "zh"
    print()
    if result.verdict != "no-error":
        print(describe_numbers(result.readings, lang))
    listed = {f"{m.runbook}:{m.conclusion}" for m in result.matches}
    problems = [r for r in result.readings
                if r["conclusion"] and r["reading"] not in HEALTHY and r["conclusion"] not in listed]
    if problems:
        print("它们还指向：" if zh else "they also point to:")
    for reading in problems:
        runbook_id, _, conclusion_id = reading["conclusion"].partition(":")
        runbook = library.get(runbook_id)  # type: ignore[attr-defined]
        conclusion = runbook.conclusions.get(conclusion_id) if runbook else None
        title = conclusion.title.get(lang) if conclusion else conclusion_id
        print(f"  - {runbook_id}: {title}  →  runbook run {runbook_id}")


def print_advice(advice: Advice, lang: str) -> None:
    """What the excerpt lacks, what to collect next, and what it resembles."""
    zh = lang == "zh"
    colon = "：" if zh else ": "
    print()
    print(f"{'内容缺少什么' if zh else 'what the excerpt lacks'}{colon}{advice.lacks(lang)}")
    print("接下来收集：" if zh else "collect next:")
    for item in advice.collect():
        print(f"  - {item['why'][lang]}{colon.strip()}")
        print(f"      {item['command']}")
        if item.get("instead"):
            print(f"      {'或' if zh else 'or'}{colon}{item['instead']}")
    if advice.closest:
        print("最相近的结论（按文本相似度，不是特征匹配）：" if zh
              else "closest conclusions (by similarity, not a signature):")
        for n, near in enumerate(advice.closest, 1):
            words = ", ".join(near.shared)
            print(f"  {n}. {near.title.get(lang)}  ({near.runbook}:{near.conclusion})"
                  f"{'：共有词 ' if zh else ': shares '}{words}")


def _print_match(rank: int, match: Match, lang: str, runbook: Runbook | None, many_files: bool) -> None:
    from runbook.triage.verdict import ROLE_WORDS  # loaded with the triage already

    zh = lang == "zh"
    role = ROLE_WORDS["zh" if zh else "en"][match.role]
    name = f"{match.runbook}:{match.conclusion}" if match.runbook else f"kb/{match.conclusion}"
    print(f"{rank:2d}. [{role}] {match.title.get(lang)}  ({name}, "
          f"{'置信度' if zh else 'confidence'} {match.confidence:.2f})")
    print(f"    {'分类' if zh else 'taxonomy'}: {', '.join(match.taxonomy) or '-'}")
    print(f"    {match.why(lang)}")
    facts = fact_line(match.facts(), zh)
    if facts:
        print(f"    {'事实' if zh else 'facts'}: {facts}")
    for hit in match.lines()[-SHOWN_LINES:]:
        text = hit.text if len(hit.text) <= LINE_WIDTH else hit.text[: LINE_WIDTH - 1] + "…"
        place = f"{hit.where:>7}" if many_files else f"{hit.line_no:>7}"
        print(f"    {place} │ {text}")
    if runbook is not None:
        print(f"    → runbook run {match.runbook}" + (f"  ({runbook.title.get(lang)})" if runbook else ""))
    elif match.kind == "article":
        print(f"    → runbook show kb/{match.conclusion}")


def fact_line(facts: dict[str, Any], zh: bool) -> str:
    """The message facts worth a line: what PyTorch, NCCL and the watchdog said, in numbers."""
    from runbook.format.expr import gib  # the runbooks' own `gib` filter (loaded with them)

    parts = []
    oom = facts.get("cuda_oom") or {}
    if oom.get("other_processes"):
        others = ", ".join(f"{o['pid']}: {o['mib'] / 1024:.2f} GiB" for o in oom["other_processes"][:4])
        parts.append(f"{'其他进程' if zh else 'other processes'} {others}")
    if oom.get("requested_mib") is not None:
        parts.append(f"{'申请' if zh else 'asked'} {gib(oom['requested_mib'])}")
    if oom.get("held_elsewhere") and not oom.get("other_processes"):
        outside, of = ("本进程之外占用", "，GPU 共 ") if zh else ("in use outside this process", " of ")
        parts.append(f"{outside} {gib(oom['elsewhere_mib'])}{of}{gib(oom['total_mib'])}")
    nccl = facts.get("nccl") or {}
    parts += [d["message"] for d in nccl.get("duplicate_gpu") or []][:2]
    if nccl.get("cause_kinds"):
        parts.append(f"NCCL {'原因' if zh else 'causes'}: {', '.join(nccl['cause_kinds'])}")
    dog = facts.get("watchdog") or {}
    if dog.get("timeouts"):
        first = dog["timeouts"][0]
        size = f" NumelIn={first['numel_in']}" if first.get("numel_in") is not None else ""
        timeout = f" Timeout(ms)={first.get('timeout_ms')}"
        parts.append(f"{first.get('op')} SeqNum={first.get('seq')}{size}{timeout}")
    rdzv = facts.get("rendezvous") or {}
    if rdzv.get("expected"):
        joined = "个客户端已加入" if zh else "clients joined"
        parts.append(f"{rdzv.get('joined')}/{rdzv['expected']} {joined}")
    return "; ".join(parts)
