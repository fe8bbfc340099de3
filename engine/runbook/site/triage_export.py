"""What the site's triage page needs to triage a log in the browser, offline: every runbook
signature as a JavaScript regex with its weight, the conclusions they name (titles, taxonomy
ids, the runbook page per language), triage's line normaliser and the ranking, written at
build time.

The page (site/static/triage.js) ranks matches by the same data `runbook triage` does: the
weights come from triage/score.py and `ranking` is triage/ranking.py's object, which the page
interprets (its sort keys, formulas, role table and line counts) with no ranking rule of its
own, so a change to the ranking is made once, in Python. The data goes out twice:
`static/triage/signatures.json` for tools, and the same object as `signatures.js` (a script
sets `window.RUNBOOK_TRIAGE`), which a page opened from file:// can load where a fetch of the
JSON would be refused.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from runbook.checks.facts import _text, cuda_oom, stackframes, state_dict, watchdog
from runbook.format.model import LANGS, Runbook, Signature
from runbook.format.patterns import to_javascript
from runbook.library import textindex
from runbook.library.kb import KnowledgeBase
from runbook.site import pages as P
from runbook.triage import errorlines, lognorm, sources
from runbook.triage.advice_rules import ADVICE
from runbook.triage.cases import MAX_DIGITS, shipped
from runbook.triage.fallback import Article, SimilarityIndex, articles_of
from runbook.triage.ranking import RANKING
from runbook.triage.readings import logends, releases, series, spread, stacks, topology
from runbook.triage.scan import BLOCK_CHARS, BLOCK_LINES, FULL_MAX, TEXT_MAX, TIME_LOOKBACK
from runbook.triage.score import is_generic, specificity
from runbook.triage.verdict import MAX_TAXONOMY

SCHEMA = "runbook-triage-page/v1"
_RELEASE_FIELDS = ("id", "affected", "log_all", "title", "fixed_in", "sources")
DIRECTORY = "static/triage"
GLOBAL = "RUNBOOK_TRIAGE"


def triage_data(runbooks: list[Runbook], articles: list[Article] | None = None) -> dict[str, Any]:
    """The exported object: signatures, conclusions, the ranking, the regexes of lognorm and
    errorlines, and the BM25 index of conclusions and `articles` (fallback.py) an error line no
    signature knows is compared with."""
    signatures: list[dict[str, Any]] = []
    conclusions: dict[str, dict[str, Any]] = {}
    for rb in runbooks:
        for signature in rb.signatures:
            if signature.conclusion is None or signature.conclusion not in rb.conclusions:
                continue  # the page names failures; a signature that names none is the CLI's guess
            signatures.append(_signature(rb, signature))
            conclusions.setdefault(f"{rb.id}:{signature.conclusion}", _conclusion(rb, signature.conclusion))
    by_id = {rb.id: rb for rb in runbooks}
    for linked in _linked_conclusions():
        rid, _, cid = linked.partition(":")
        if rid in by_id and cid in by_id[rid].conclusions:
            conclusions.setdefault(linked, _conclusion(by_id[rid], cid))
    return {
        "schema": SCHEMA, "max_taxonomy": MAX_TAXONOMY, "text_max": TEXT_MAX, "ranking": RANKING,
        "advice": ADVICE,
        "normalise": {"ansi": _js(lognorm.ANSI), "prefix": _prefix(),
                      "wrap_widths": sorted(lognorm.WRAP_WIDTHS), "max_joined": lognorm.MAX_JOINED,
                      "record_start": lognorm.RECORD_START,
                      "cri_partial": _js(lognorm.CRI_PARTIAL), "entity": _js(lognorm.ENTITY),
                      "entities": lognorm.ENTITIES},
        "errors": _errors(),
        "logends": _logends(),
        "topology": _topology(),
        "time": _js(sources.TIMESTAMP), "time_lookback": TIME_LOOKBACK,
        "line_rank": _js(sources.LINE_RANK),
        "spread": {"identity": _js(spread.IDENTITY_RE), "max_shown": spread.MAX_SHOWN,
                   "text_max": spread.TEXT_MAX,
                   "facts": [{**fact, "regex": _js(re.compile(fact["pattern"]))} for fact in spread.FACTS]},
        "series": {"metrics": [{**spec, "regex": _js(regex)} for spec, regex in series.SPECS],
                   "needles": list(series.NEEDLES), "schedule": _js(series.SCHEDULE_RE),
                   "rules": series.RULES, "conclusions": series.CONCLUSIONS, "order": series.ORDER,
                   "healthy": list(series.HEALTHY), "texts": series.TEXTS,
                   "metric_names": series.METRIC_NAMES, "units": series.UNITS},
        "stacks": {"patterns": {name: _js(regex) for name, regex in stacks.COMPILED.items()},
                   "needles": list(stacks.NEEDLES), "wait_conclusions": stacks.WAIT_CONCLUSIONS,
                   "mismatch": stacks.MISMATCH, "guess": stacks.GUESS,
                   "worker_frame": list(stacks.WORKER_FRAME), "address": _js(stacks.ADDRESS),
                   "texts": stacks.TEXTS, "max_threads": stacks.MAX_THREADS, "max_frames": stacks.MAX_FRAMES,
                   "headless_run": stacks.HEADLESS_RUN, "idle_only": list(stacks.IDLE_ONLY),
                   "frames": {"rules": stackframes.RULES, "native": stackframes.NATIVE,
                              "io_files": stackframes.IO_FILES, "io_suffixes": stackframes.IO_SUFFIXES,
                              "io_funcs": stackframes.IO_FUNCS, "so_file": stackframes.SO_FILE.pattern}},
        "oom": _oom(),  # checks/facts/cuda_oom: the numbers the ranking's `refine` reads
        "watchdog": _watchdog(),  # checks/facts/watchdog: the collectives the ranks wait in
        "state_dict": _state_dict(),  # checks/facts/state_dict: the keys the ranking's `refine` reads
        "signatures": signatures,
        "conclusions": conclusions,
        "cases": _cases(by_id, conclusions),
        "similarity": _similarity(runbooks, articles or [], conclusions),
        "releases": _releases(),
        "full_max": FULL_MAX,
    }


def _errors() -> dict[str, Any]:
    """errorlines.py's keywords and regexes, and how scan.py keeps error lines (per block)."""
    return {"keywords": list(errorlines.KEYWORDS), "exception": _js(errorlines.EXCEPTION_LINE),
            "error": _js(errorlines.ERROR_LINE), "not_error": _js(errorlines.NOT_ERRORS),
            "traceback": _js(errorlines.TRACEBACK), "keep": errorlines.KEEP,
            "frame": _js(errorlines.FRAME), "library_roots": list(errorlines.LIBRARY_ROOTS),
            "every_program": sorted(errorlines.EVERY_PROGRAM),
            "block_lines": BLOCK_LINES, "block_chars": BLOCK_CHARS}


def _releases() -> dict[str, Any]:
    """releases.py's version patterns and the known_issues table's error rows; the rows' regexes
    are Python's own (with lookahead), which the page compiles as they are."""
    return {"conclusion": releases.CONCLUSION, "component": releases.COMPONENT,
            "versions": [{"needle": v["needle"], "regex": _js(re.compile(v["pattern"]))}
                         for v in releases.VERSIONS],
            "rows": [{key: row[key] for key in _RELEASE_FIELDS if key in row} for row in releases.rows()]}


def _similarity(runbooks: list[Runbook], articles: list[Article],
                conclusions: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """fallback.SimilarityIndex as data, each document's conclusion joining the exported ones and
    each article's title, taxonomy and page beside it."""
    index = SimilarityIndex(runbooks, articles)
    by_id = {rb.id: rb for rb in runbooks}
    for kind, runbook, item_id, _, _ in index.items:
        if kind == "conclusion":
            conclusions.setdefault(f"{runbook}:{item_id}", _conclusion(by_id[runbook], item_id))
    return {**index.export(), "cjk": textindex.CJK,
            "articles": {slug: {"title": {lang: titles.get(lang, titles.get("en", slug)) for lang in LANGS},
                                "taxonomy": taxonomy[:MAX_TAXONOMY],
                                "url": {lang: P.article_url(lang, slug) for lang in LANGS}}
                         for slug, titles, taxonomy, _ in articles}}


def _cases(by_id: dict[str, Runbook], conclusions: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """triage/cases.py's known cases (source, wanted conclusion, terms) and the rules of its
    tokeniser; each case's conclusion joins the exported ones."""
    items = []
    for case, count in shipped().indexed():
        rid, _, cid = case.conclusions[0].partition(":")
        if rid in by_id and cid in by_id[rid].conclusions:
            conclusions.setdefault(case.conclusions[0], _conclusion(by_id[rid], cid))
        items.append({"source": case.source, "conclusions": list(case.conclusions), "terms": dict(count)})
    return {"items": items, "cjk": textindex.CJK, "max_digits": MAX_DIGITS}


def _linked_conclusions() -> list[str]:
    """What a difference across hosts, a reading of the numbers, the stacks or the log's end, or a
    message's facts (the ranking's `refine`) lead to, besides the signatures' conclusions."""
    return ([fact["conclusion"] for fact in spread.FACTS] + list(series.CONCLUSIONS.values())
            + list(logends.CONCLUSIONS.values()) + list(topology.CONCLUSIONS.values())
            + list(stacks.WAIT_CONCLUSIONS.values()) + [stacks.MISMATCH, stacks.GUESS]
            + [rule["becomes"] for rule in RANKING["refine"]] + [releases.CONCLUSION])


def _state_dict() -> dict[str, Any]:
    """checks/facts/state_dict's regexes and share, for the page's reading of the key lists."""
    return {"missing": _js(state_dict.MISSING), "unexpected": _js(state_dict.UNEXPECTED),
            "key": _js(state_dict.KEY), "explained_share": state_dict.EXPLAINED_SHARE,
            "max_line": _text.MAX_LINE}


def _watchdog() -> dict[str, Any]:
    """checks/facts/watchdog's timeout line, for the page's reading of the ranks' collectives."""
    return {"caught": watchdog.CAUGHT, "rank": _js(watchdog.RANK), "job_rank": _js(watchdog.JOB_RANK),
            "pg": _js(watchdog.PG), "seq": _js(watchdog.WORK["seq"]), "op": _js(watchdog.WORK["op"]),
            "numel_in": _js(watchdog.WORK["numel_in"]), "first_collectives": watchdog.FIRST_COLLECTIVES,
            "max_items": _text.MAX_ITEMS, "max_line": _text.MAX_LINE}


def _oom() -> dict[str, Any]:
    """checks/facts/cuda_oom's regexes and thresholds, for the page's reading of an OOM message."""
    return {"fields": {name: _js(regex) for name, regex in cuda_oom.FIELDS.items()},
            "process": _js(cuda_oom.PROCESS), "units": cuda_oom.MIB_PER_UNIT,
            "others_min_mib": cuda_oom.OTHERS_MIN_MIB, "others_min_share": cuda_oom.OTHERS_MIN_SHARE,
            "context_max_mib": cuda_oom.CONTEXT_MAX_MIB, "self_min_share": cuda_oom.SELF_MIN_SHARE}


def _topology() -> dict[str, Any]:
    """triage/readings/topology.py's rules, regexes and texts, for the page's same readings."""
    return {"rules": topology.RULES, "header": _js(topology.HEADER), "row": _js(topology.ROW),
            "nvlink": _js(topology.NVLINK), "bandwidth": _js(topology.BANDWIDTH),
            "matrix_row": _js(topology.MATRIX_ROW), "printed": _js(topology.PRINTED),
            "literal": _js(topology.LITERAL), "value": _js(topology.VALUE), "device": _js(topology.DEVICE),
            "copy": _js(topology.COPY), "conclusions": topology.CONCLUSIONS,
            "texts": topology.TEXTS}


def write(runbooks: list[Runbook], out: Path, kb: KnowledgeBase | None = None) -> Path:
    """Write signatures.json and signatures.js under `out`/static/triage; return that folder."""
    folder = out / DIRECTORY
    folder.mkdir(parents=True, exist_ok=True)
    data = triage_data(runbooks, articles_of(kb))
    text = json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    (folder / "signatures.json").write_text(text + "\n", "utf-8")
    # `</` never appears raw inside a script: a title holding `</script>` stays text.
    script = text.replace("</", "<\\/").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    (folder / "signatures.js").write_text(f"window.{GLOBAL} = {script};\n", "utf-8")
    return folder


def _signature(rb: Runbook, signature: Signature) -> dict[str, Any]:
    return {"runbook": rb.id, "conclusion": signature.conclusion, "role": signature.role,
            **_pattern(signature.pattern)}


@lru_cache(maxsize=8192)
def _pattern_fields(pattern: str) -> tuple[tuple[str, Any], ...]:
    # Analysing a regex is the slow part; `site serve` writes this file again on every save.
    source, flags = to_javascript(pattern)
    return (("weight", specificity(pattern)), ("generic", is_generic(pattern)), ("pattern", pattern),
            ("source", source), ("flags", flags))


def _pattern(pattern: str) -> dict[str, Any]:
    return dict(_pattern_fields(pattern))


def _conclusion(rb: Runbook, conclusion_id: str) -> dict[str, Any]:
    conclusion = rb.conclusions[conclusion_id]
    return {"runbook": rb.id, "conclusion": conclusion_id,
            "title": {lang: conclusion.title.get(lang) for lang in LANGS},
            "runbook_title": {lang: rb.title.get(lang) for lang in LANGS},
            "taxonomy": list(conclusion.taxonomy[:MAX_TAXONOMY]),
            "catch_all": conclusion.generic,  # ranked after the conclusions that name a cause
            # the runbook page gives every conclusion a section with its id as the anchor
            "url": {lang: P.runbook_url(lang, rb.id, conclusion_id) for lang in LANGS}}


def _prefix() -> dict[str, str]:
    """lognorm.PREFIX for JavaScript: `\\A` is `^` there (no m flag: one line at a time)."""
    source = lognorm.PREFIX.pattern
    if not source.startswith(r"\A"):
        raise ValueError(f"lognorm.PREFIX no longer starts with \\A: {source[:40]!r}")
    return {"source": "^" + source[2:], "flags": ""}


def _logends() -> dict[str, Any]:
    """logends.py's rules and regexes: a paste of ordinary output that just stops."""
    return {"rules": logends.RULES, "finished": _js(logends.FINISHED), "rl": _js(logends.RL),
            "word": _js(logends.WORD), "pointed": _js(logends.POINTED), "values": _js(logends.VALUES),
            "nccl_tests": _js(logends.NCCL_TESTS), "nccl_tests_row": _js(logends.NCCL_TESTS_ROW),
            "nccl_tests_host": _js(logends.NCCL_TESTS_HOST),
            "conclusions": logends.CONCLUSIONS, "texts": logends.TEXTS}


def _js(regex: re.Pattern[str]) -> dict[str, str]:
    """A compiled Python regex as (source, flags) for JavaScript (only IGNORECASE carries over)."""
    source, flags = to_javascript(regex.pattern)
    if regex.flags & re.IGNORECASE and "i" not in flags:
        flags += "i"
    return {"source": source, "flags": flags}
