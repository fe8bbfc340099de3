"""Synthetic, valid, bilingual content for the site benchmark: runbooks and knowledge-base articles.

`generate(root, runbooks=N, articles=M, seed=S)` writes `root/runbooks/*.yaml` and
`root/kb/<slug>/{en,zh}.md`, the same bytes for the same arguments. Runbooks have 3 to 30
steps with branches (now and then into another runbook), conclusions with taxonomy ids from
the package's taxonomy.yaml, fixes with commands and code, see_also links; articles run from a
few hundred to a few thousand words of Markdown (headings, lists, tables, code blocks, links
`runbook:ID` and `kb:SLUG`). An article names only runbooks that link back to it, so
`runbook lint ROOT/runbooks ROOT/kb` reports nothing. Ids start with `synth-`, so they never
clash with the repository's own runbooks and articles.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import vocab as V
import yaml

from runbook.format import taxonomy

PARAMS: dict[str, dict[str, Any]] = {
    "log": {"type": "path", "help": {"en": "The training log to read, e.g. logs/train.log",
                                      "zh": "要读取的训练日志，例如 logs/train.log"}},
    "match": {"type": "string", "help": {"en": "Regex on the command line of the training process",
                                          "zh": "用于匹配训练进程命令行的正则表达式"}},
    "pid": {"type": "integer", "help": {"en": "PID of the training process (default: found automatically)",
                                         "zh": "训练进程的 PID（默认自动查找）"}},
    "stall_after": {"type": "number", "default": 120,
                    "help": {"en": "Seconds without a new log line after which the log counts as stopped",
                             "zh": "日志多少秒没有新行即视为停止"}},
    "expected_gpus": {"type": "integer", "default": 8,
                      "help": {"en": "GPUs each node should have", "zh": "每个节点应有的 GPU 数量"}},
    "master_port": {"type": "integer", "default": 29500,
                    "help": {"en": "The rendezvous port (MASTER_PORT)",
                             "zh": "rendezvous 端口（MASTER_PORT）"}},
}


class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """Plain YAML as a person writes it: no anchors and aliases for repeated values."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def dump(data: Any, width: int) -> str:
    return yaml.dump(data, Dumper=_Dumper, allow_unicode=True, sort_keys=False, width=width)


@dataclass
class Generated:
    root: Path
    runbooks_dir: Path
    kb_dir: Path
    runbook_ids: list[str]
    article_slugs: list[str]
    words_en: int = 0  # words in the English article bodies, all together


@dataclass
class Plan:
    """Ids and the links between articles and runbooks, decided before anything is written."""

    runbook_ids: list[str]
    article_slugs: list[str]
    named_by: dict[str, list[str]] = field(default_factory=dict)  # runbook id -> slugs naming it
    names: dict[str, list[str]] = field(default_factory=dict)  # slug -> runbook ids it names


_CJK_LATIN = re.compile(r"([\u4e00-\u9fff])([A-Za-z0-9/`])|([A-Za-z0-9`])([\u4e00-\u9fff])")


def spaced(text: str) -> str:
    """A space between Chinese and Latin text, as Chinese technical writing has it."""
    return _CJK_LATIN.sub(lambda m: f"{m[1]} {m[2]}" if m[1] else f"{m[3]} {m[4]}", text)


class Words:
    """Fills the bilingual templates: every choice is made once and used for both languages."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def slots(self) -> dict[str, Any]:
        rng = self.rng
        (c, cz), (c2, c2z) = rng.sample(V.COMPONENTS, 2)
        p, pz = rng.choice(V.PROBLEMS)
        common = {"n": rng.choice([4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, rng.randint(3, 99_999)]),
                  "node": f"gpu{rng.randint(1, 2048):04d}", "env": rng.choice(V.ENVS),
                  "sec": rng.choice([30, 60, 120, 300, 600, 1800]), "rank": rng.randint(0, 63)}
        return {"en": {**common, "c": c, "C": c[:1].upper() + c[1:], "c2": c2, "p": p},
                "zh": {**common, "c": cz, "C": cz, "c2": c2z, "p": pz}}

    def pair(self, templates: list[V.Pair], slots: dict[str, Any] | None = None) -> dict[str, str]:
        en, zh = self.rng.choice(templates)
        s = slots or self.slots()
        return {"en": en.format(**s["en"]), "zh": spaced(zh.format(**s["zh"]))}

    def sentences(self, count: int) -> dict[str, str]:
        parts = [self.pair(V.SENTENCES) for _ in range(count)]
        return {"en": " ".join(p["en"] for p in parts), "zh": "".join(p["zh"] for p in parts)}

    def log_lines(self, count: int) -> str:
        rng = self.rng
        return "\n".join(rng.choice(V.LOG_LINES).format(
            rank=rng.randint(0, 63), n=rng.randint(10, 99_999), ms=rng.choice([600000, 1800000]),
            bus=f"{rng.randint(16, 250):02x}", node=f"gpu{rng.randint(1, 2048):04d}") for _ in range(count))

    def code(self, rid: str) -> str:
        lang, body = self.rng.choice(V.CODE_SNIPPETS)
        s = self.slots()["en"]
        return f"```{lang}\n{body.format(rid=rid, n2=self.rng.randint(10, 99), **s)}\n```"


def generate(root: Path, runbooks: int = 500, articles: int = 500, seed: int = 1) -> Generated:
    rng = random.Random(seed)
    plan = make_plan(rng, runbooks, articles)
    out = Generated(root, root / "runbooks", root / "kb", plan.runbook_ids, plan.article_slugs)
    out.runbooks_dir.mkdir(parents=True, exist_ok=True)
    out.kb_dir.mkdir(parents=True, exist_ok=True)
    words = Words(rng)
    titles: dict[str, dict[str, str]] = {}
    for rid in plan.runbook_ids:
        doc = runbook_doc(words, rid, plan)
        titles[rid] = doc["title"]
        text = dump(doc, 100)
        (out.runbooks_dir / f"{rid}.yaml").write_text(text, "utf-8")
    for slug in plan.article_slugs:
        out.words_en += write_article(words, out.kb_dir / slug, slug, plan, titles)
    return out


def make_plan(rng: random.Random, runbooks: int, articles: int) -> Plan:
    leaves = [tid.replace(".", "-") for tid in taxonomy.load()]
    rids = [f"synth-{rng.choice(leaves)}-{i:04d}" for i in range(1, runbooks + 1)]
    slugs = [f"synth-{rng.choice(leaves)}-notes-{i:04d}" for i in range(1, articles + 1)]
    plan = Plan(rids, slugs)
    for slug in slugs:
        named = rng.sample(rids, min(len(rids), rng.choice([0, 1, 1, 2, 2, 3])))
        plan.names[slug] = named
        for rid in named:
            plan.named_by.setdefault(rid, []).append(slug)
    return plan


# -- runbooks --


def runbook_doc(words: Words, rid: str, plan: Plan) -> dict[str, Any]:
    rng = words.rng
    n_steps = max(3, min(30, round(rng.lognormvariate(math.log(9), 0.6))))
    steps = [f"{rng.choice(list(V.STEP_TITLES))}-{i + 1}" for i in range(n_steps)]
    n_conclusions = rng.randint(2, max(2, min(14, n_steps // 2 + 2)))
    conclusions = [f"finding-{j + 1}" for j in range(n_conclusions)]
    slots = words.slots()
    doc: dict[str, Any] = {
        "apiVersion": "runbook/v1", "id": rid, "version": f"1.{rng.randint(0, 9)}.{rng.randint(0, 9)}",
        "title": words.pair(V.RUNBOOK_TITLES, slots), "summary": words.pair(V.RUNBOOK_SUMMARIES, slots),
        "tags": sorted({rid.split("-")[1], *rng.sample(["hang", "gpu", "nccl", "oom", "ray", "data",
                                                         "checkpoint", "network", "slow"], 2)}),
        "symptoms": [words.pair(V.SYMPTOMS) for _ in range(rng.randint(1, 6))],
        # Each signature names the failure its line shows (lint warns otherwise); no extra rng draw.
        "signatures": [{"pattern": p, "goto": steps[min(i, n_steps - 1)],
                        "conclusion": conclusions[min(i, n_conclusions - 1)]} for i, p in
                       enumerate(rng.sample(_SIGNATURES, rng.randint(0, 3)))],
        "params": PARAMS, "start": steps[0],
        "steps": step_docs(words, steps, conclusions, plan),
        "conclusions": {cid: conclusion_doc(words, rid, plan) for cid in conclusions},
        "changelog": [{"version": "1.0.0", "en": "First version.", "zh": "第一版。"}],
    }
    _link_back(rng, doc["conclusions"], plan.named_by.get(rid, []))
    return doc


_SIGNATURES = [r"Watchdog caught collective operation timeout", r"CUDA out of memory",
               r"NCCL WARN .*unhandled system error", r"Xid \d+", r"Address already in use",
               r"Missing key\(s\) in state_dict", r"loss[\s:=]+nan"]


def step_docs(words: Words, steps: list[str], conclusions: list[str], plan: Plan) -> dict[str, Any]:
    """Steps in a chain (each step's default is the next one), branches to later steps and to
    conclusions; every conclusion is some branch's target, so all are reachable."""
    rng = words.rng
    targets_left = list(conclusions)
    out: dict[str, Any] = {}
    for i, sid in enumerate(steps):
        ctype = sid.rsplit("-", 1)[0]
        conditions = V.CONDITIONS[ctype]
        branches = []
        for when, note_en, note_zh in rng.sample(conditions, rng.randint(1, len(conditions))):
            branches.append({"when": when, "goto": _branch_target(rng, i, steps, conclusions, targets_left,
                                                                  plan),
                             "note": {"en": note_en, "zh": note_zh}})
        step: dict[str, Any] = {"title": words.pair(V.STEP_TITLES[ctype], words.slots())}
        if rng.random() < 0.6:
            step["description"] = words.sentences(rng.randint(1, 3))
        step["check"] = {"type": ctype, "with": V.CHECK_WITH[ctype],
                         "timeout": rng.choice(["5s", "10s", "30s"])}
        step["branches"] = branches
        last = i == len(steps) - 1
        step["default"] = (targets_left.pop() if targets_left else rng.choice(conclusions)) if last \
            else steps[i + 1]
        out[sid] = step
    if targets_left:  # more conclusions than branches: the last step takes the rest
        last_step = out[steps[-1]]
        for cid in targets_left:
            when, note_en, note_zh = rng.choice(V.CONDITIONS[steps[-1].rsplit("-", 1)[0]])
            last_step["branches"].append({"when": when, "goto": cid, "note": {"en": note_en, "zh": note_zh}})
    return out


def _branch_target(rng: random.Random, i: int, steps: list[str], conclusions: list[str],
                   targets_left: list[str], plan: Plan) -> str:
    if targets_left and rng.random() < 0.7:
        return targets_left.pop(0)
    roll = rng.random()
    if roll < 0.08 and len(plan.runbook_ids) > 1:
        return f"{rng.choice(plan.runbook_ids)}:start"
    if roll < 0.35 and i + 2 < len(steps):
        return rng.choice(steps[i + 2:])
    return rng.choice(conclusions)


def conclusion_doc(words: Words, rid: str, plan: Plan) -> dict[str, Any]:
    rng = words.rng
    categories = taxonomy.load()
    ids = rng.sample(sorted(categories), rng.choice([1, 1, 1, 2, 2, 3]))
    slots = words.slots()
    explanation = words.sentences(rng.randint(2, 5))
    first = categories[ids[0]]
    doc: dict[str, Any] = {
        "severity": rng.choice(["ok", "info", "warning", "warning", "critical", "critical"]),
        "taxonomy": ids, "title": words.pair(V.CONCLUSION_TITLES, slots),
        "explanation": {"en": f"This is a case of: {first.en}. {explanation['en']}",
                        "zh": f"属于以下情况：{first.zh}。{explanation['zh']}"},
        "fixes": [fix_doc(words, rid) for _ in range(rng.randint(1, 4))],
    }
    see_also = [f"kb:{s}" for s in rng.sample(plan.article_slugs, min(len(plan.article_slugs),
                                                                     rng.choice([0, 0, 1, 2])))]
    if len(plan.runbook_ids) > 1 and rng.random() < 0.3:
        see_also.append(f"runbook:{rng.choice([r for r in plan.runbook_ids if r != rid])}")
    if see_also:
        doc["see_also"] = sorted(set(see_also))
    return doc


def fix_doc(words: Words, rid: str) -> dict[str, Any]:
    rng = words.rng
    title_en, title_zh, effect, command = rng.choice(V.FIXES)
    fix: dict[str, Any] = {"title": {"en": title_en, "zh": title_zh}}
    if command is None or rng.random() < 0.5:
        body = words.sentences(rng.randint(1, 3))
        if rng.random() < 0.3:
            block = words.code(rid)
            body = {"en": f"{body['en']}\n\n{block}", "zh": f"{body['zh']}\n\n{block}"}
        fix["body"] = body
    if command is not None:
        fix["run"] = command
    fix["effect"] = effect
    return fix


def _link_back(rng: random.Random, conclusions: dict[str, Any], slugs: list[str]) -> None:
    """Every article that names this runbook gets a `kb:` link from one of its conclusions."""
    for slug in slugs:
        conclusion = conclusions[rng.choice(sorted(conclusions))]
        links = set(conclusion.get("see_also", []))
        links.add(f"kb:{slug}")
        conclusion["see_also"] = sorted(links)


# -- articles --


def write_article(words: Words, folder: Path, slug: str, plan: Plan,
                  titles: dict[str, dict[str, str]]) -> int:
    """Write en.md and zh.md; return the English body's word count."""
    rng = words.rng
    slots = words.slots()
    title = words.pair(V.ARTICLE_TITLES, slots)
    summary = words.pair(V.ARTICLE_SUMMARIES, slots)
    tax = rng.sample(sorted(taxonomy.load()), rng.randint(0, 3))
    tags = sorted({slug.split("-")[1], *rng.sample(["gpu", "nccl", "ray", "data", "on-call", "slurm",
                                                     "checkpoint", "network", "memory"], 3)})
    target = int(math.exp(rng.uniform(math.log(300), math.log(3000))))
    body = article_body(words, slug, plan, titles, target)
    folder.mkdir(parents=True, exist_ok=True)
    for lang in ("en", "zh"):
        meta = {"id": slug, "lang": lang, "title": title[lang], "summary": summary[lang], "tags": tags,
                "taxonomy": tax, "runbooks": plan.names.get(slug, [])}
        front = dump(meta, 1000)
        (folder / f"{lang}.md").write_text(f"---\n{front}---\n\n{body[lang]}\n", "utf-8")
    return len(body["en"].split())


def article_body(words: Words, slug: str, plan: Plan, titles: dict[str, dict[str, str]],
                 target_words: int) -> dict[str, str]:
    rng = words.rng
    blocks: list[dict[str, str]] = [_paragraph(words, slug, plan, titles)]
    count = len(blocks[0]["en"].split())
    while count < target_words:
        for block in _section(words, slug, plan, titles, rng.random() < 0.3):
            blocks.append(block)
            count += len(block["en"].split())
    return {lang: "\n\n".join(b[lang] for b in blocks) for lang in ("en", "zh")}


def _section(words: Words, slug: str, plan: Plan, titles: dict[str, dict[str, str]],
             sub: bool) -> list[dict[str, str]]:
    rng = words.rng
    heading = words.pair(V.HEADINGS)
    marks = "###" if sub else "##"
    out = [{"en": f"{marks} {heading['en']}", "zh": f"{marks} {heading['zh']}"}]
    out.append(_paragraph(words, slug, plan, titles))
    extras = [_bullets, _numbered, _table, _code, _paragraph_block]
    for make in rng.sample(extras, rng.randint(1, 3)):
        out.append(make(words, slug, plan, titles))
    return out


def _paragraph(words: Words, slug: str, plan: Plan, titles: dict[str, dict[str, str]]) -> dict[str, str]:
    rng = words.rng
    text = words.sentences(rng.randint(3, 7))
    link = _link_sentence(words, slug, plan, titles)
    if link and rng.random() < 0.6:
        text = {"en": f"{text['en']} {link['en']}", "zh": f"{text['zh']}{link['zh']}"}
    return text


def _paragraph_block(words: Words, slug: str, plan: Plan,
                     titles: dict[str, dict[str, str]]) -> dict[str, str]:
    return _paragraph(words, slug, plan, titles)


def _link_sentence(words: Words, slug: str, plan: Plan,
                   titles: dict[str, dict[str, str]]) -> dict[str, str] | None:
    rng = words.rng
    named = plan.names.get(slug) or []
    pool = named or plan.runbook_ids
    if pool and rng.random() < 0.6:
        rid = rng.choice(pool)
        t = titles[rid]
        anchor = f"#{rng.choice(['start', 'finding-1'])}" if rng.random() < 0.2 else ""
        return {"en": f"The runbook [{t['en']}](runbook:{rid}{anchor}) walks through it node by node.",
                "zh": f"运行手册 [{t['zh']}](runbook:{rid}{anchor}) 会逐个节点排查。"}
    if len(plan.article_slugs) > 1:
        other = rng.choice([s for s in plan.article_slugs if s != slug])
        return {"en": f"The article [{other}](kb:{other}) covers a neighbouring case.",
                "zh": f"相邻的情况见文章 [{other}](kb:{other})。"}
    return None


def _bullets(words: Words, *_args: Any) -> dict[str, str]:
    items = [words.sentences(1) for _ in range(words.rng.randint(3, 6))]
    return {lang: "\n".join(f"- {i[lang]}" for i in items) for lang in ("en", "zh")}


def _numbered(words: Words, *_args: Any) -> dict[str, str]:
    items = [words.sentences(1) for _ in range(words.rng.randint(3, 6))]
    return {lang: "\n".join(f"{n}. {i[lang]}" for n, i in enumerate(items, 1)) for lang in ("en", "zh")}


def _table(words: Words, *_args: Any) -> dict[str, str]:
    rng = words.rng
    head = {"en": "| What you see | Where | What it usually means |", "zh": "| 现象 | 位置 | 通常的含义 |"}
    rows: dict[str, list[str]] = {"en": [], "zh": []}
    for _ in range(rng.randint(3, 8)):
        symptom, where = words.pair(V.SYMPTOMS), words.pair(V.COMPONENTS_ONLY)
        meaning = words.pair(V.CONCLUSION_TITLES)
        for lang in ("en", "zh"):
            rows[lang].append(f"| {symptom[lang]} | {where[lang]} | {meaning[lang]} |")
    return {lang: "\n".join([head[lang], "| --- | --- | --- |", *rows[lang]]) for lang in ("en", "zh")}


def _code(words: Words, slug: str, plan: Plan, *_args: Any) -> dict[str, str]:
    rng = words.rng
    if rng.random() < 0.5:
        block = f"```text\n{words.log_lines(rng.randint(2, 8))}\n```"
    else:
        block = words.code(rng.choice(plan.runbook_ids) if plan.runbook_ids else "training-hang")
    intro = words.sentences(1)
    return {"en": f"{intro['en']}\n\n{block}", "zh": f"{intro['zh']}\n\n{block}"}
