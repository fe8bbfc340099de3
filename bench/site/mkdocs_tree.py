"""The same runbooks and articles as a MkDocs project: what a team would build instead of our site.

`write_project(root, runbooks, kb)` writes `root/mkdocs.yml` and `root/docs/`: a start page,
one index page per language, and per language one page per runbook (title, summary, tags,
symptoms, signatures, parameters, the command that runs it, every step with its check and
branches, every conclusion with its explanation, fixes, commands and links, the changelog)
and one page per article (its Markdown body, `runbook:ID` / `kb:SLUG` links rewritten to the
pages they name). The config uses the built-in `mkdocs` theme and the built-in `search`
plugin, so both sides build a searchable site; nothing in it needs the network.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from runbook.format.model import LANGS, Conclusion, Runbook, Step, Text
from runbook.library.kb import KnowledgeBase

_LINK = re.compile(r"\]\((kb|runbook):([a-z0-9][a-z0-9-]*)(#[^)\s]*)?\)")
HEADINGS = {
    "en": {"symptoms": "Symptoms", "signatures": "Log signatures", "params": "Parameters",
           "run": "Run it", "steps": "Steps", "conclusions": "Conclusions", "fixes": "Fixes",
           "changelog": "Changelog", "check": "Check", "default": "Otherwise", "see": "See also",
           "severity": "Severity", "taxonomy": "Taxonomy", "runbooks": "Runbooks", "articles": "Articles",
           "tags": "Tags", "effect": "Effect", "related": "Related runbooks"},
    "zh": {"symptoms": "症状", "signatures": "日志特征", "params": "参数", "run": "运行", "steps": "步骤",
           "conclusions": "结论", "fixes": "修复方法", "changelog": "变更记录", "check": "检查",
           "default": "否则", "see": "另见", "severity": "严重程度", "taxonomy": "分类",
           "runbooks": "运行手册", "articles": "知识库文章", "tags": "标签", "effect": "影响",
           "related": "相关运行手册"},
}

Linker = Callable[[str, str, str], str]  # (kind, id, "#anchor" or "") -> relative .md link


def write_project(root: Path, runbooks: list[Runbook], kb: KnowledgeBase) -> Path:
    """Write the MkDocs project; return the path of its mkdocs.yml."""
    docs = root / "docs"
    (docs).mkdir(parents=True, exist_ok=True)
    (docs / "index.md").write_text("# Runbooks\n\n- [English](en/index.md)\n- [中文](zh/index.md)\n", "utf-8")
    for lang in LANGS:
        base = docs / lang
        (base / "runbooks").mkdir(parents=True, exist_ok=True)
        (base / "kb").mkdir(parents=True, exist_ok=True)
        (base / "index.md").write_text(index_page(lang, runbooks, kb), "utf-8")
        for rb in runbooks:
            (base / "runbooks" / f"{rb.id}.md").write_text(runbook_page(rb, lang), "utf-8")
        for slug, versions in kb.articles.items():
            article = versions.get(lang) or next(iter(versions.values()))
            body = rewrite_links(article.body, _linker("kb"))
            related = "".join(f"- [{rid}](../runbooks/{rid}.md)\n" for rid in article.runbooks)
            text = f"# {article.title}\n\n*{article.summary}*\n\n{body}\n"
            if related:
                text += f"\n## {HEADINGS[lang]['related']}\n\n{related}"
            (base / "kb" / f"{slug}.md").write_text(text, "utf-8")
    config = root / "mkdocs.yml"
    config.write_text(mkdocs_yml(), "utf-8")
    return config


def mkdocs_yml() -> str:
    # The nav names only the start pages, like our site's header: an auto-generated nav of every
    # page would be rendered into every page and make MkDocs' build grow with pages squared.
    return "\n".join([
        "site_name: Runbooks", "docs_dir: docs", "site_dir: site", "use_directory_urls: true",
        "theme:", "  name: mkdocs",
        "plugins:", "  - search:", "      lang: [en, zh]",
        "markdown_extensions:", "  - attr_list",
        "nav:", "  - Home: index.md", "  - English: en/index.md", "  - 中文: zh/index.md", "",
    ])


def index_page(lang: str, runbooks: list[Runbook], kb: KnowledgeBase) -> str:
    h = HEADINGS[lang]
    lines = ["# Runbooks" if lang == "en" else "# 运行手册与知识库", "", f"## {h['runbooks']}", ""]
    lines += [f"- [{rb.title.get(lang)}](runbooks/{rb.id}.md): {rb.summary.get(lang)}" for rb in runbooks]
    lines += ["", f"## {h['articles']}", ""]
    for slug, versions in sorted(kb.articles.items()):
        article = versions.get(lang) or next(iter(versions.values()))
        lines.append(f"- [{article.title}](kb/{slug}.md): {article.summary}")
    return "\n".join(lines) + "\n"


def _linker(where: str) -> Linker:
    """Links from a page in `{lang}/runbooks/` or `{lang}/kb/` to another runbook or article."""
    def link(kind: str, target: str, anchor: str) -> str:
        folder = "runbooks" if kind == "runbook" else "kb"
        prefix = "" if folder == where else f"../{folder}/"
        return f"{prefix}{target}.md{anchor}"
    return link


def rewrite_links(markdown: str, linker: Linker) -> str:
    return _LINK.sub(lambda m: f"]({linker(m.group(1), m.group(2), m.group(3) or '')})", markdown)


def runbook_page(rb: Runbook, lang: str) -> str:
    h = HEADINGS[lang]
    link = _linker("runbooks")

    def t(value: Text | None) -> str:
        return rewrite_links(value.get(lang), link) if value else ""

    out = [f"# {t(rb.title)}", "", t(rb.summary), "",
           f"**{h['tags']}:** {', '.join(rb.tags)} · **version** {rb.version}", ""]
    if rb.symptoms:
        out += [f"## {h['symptoms']}", "", *[f"- {t(s)}" for s in rb.symptoms], ""]
    if rb.signatures:
        out += [f"## {h['signatures']}", "", "| pattern | → |", "| --- | --- |"]
        out += [f"| `{_cell(s.pattern)}` | {_goto(rb, s.goto, lang) if s.goto else ''} |"
                for s in rb.signatures]
        out.append("")
    if rb.params:
        out += [f"## {h['params']}", "", "| name | type | default | |", "| --- | --- | --- | --- |"]
        out += [f"| `{p.name}` | {p.type} | {'' if p.default is None else p.default} | {_cell(t(p.help))} |"
                for p in rb.params.values()]
        out.append("")
    out += [f"## {h['run']}", "", "```bash", f"runbook run {rb.id} --nodes 'gpu[01-16]'", "```", ""]
    out += [f"## {h['steps']}", ""]
    for step in rb.steps.values():
        out += step_section(rb, step, lang, t)
    out += [f"## {h['conclusions']}", ""]
    for conclusion in rb.conclusions.values():
        out += conclusion_section(conclusion, lang, t)
    if rb.changelog:
        out += [f"## {h['changelog']}", "", *[f"- **{c.version}**: {t(c.text)}" for c in rb.changelog], ""]
    return "\n".join(out)


def step_section(rb: Runbook, step: Step, lang: str, t: Callable[[Text | None], str]) -> list[str]:
    h = HEADINGS[lang]
    out = [f"### {t(step.title)} {{#{step.id}}}", ""]
    if step.description:
        out += [t(step.description), ""]
    timeout = f", timeout {step.check.timeout:g} s" if step.check.timeout else ""
    out += [f"{h['check']}: `{step.check.type}`{timeout}", "", "```json",
            json.dumps(step.check.with_, ensure_ascii=False, indent=2), "```", ""]
    for n, branch in enumerate(step.branches, 1):
        note = f" — {t(branch.note)}" if branch.note else ""
        out.append(f"{n}. `{branch.when}` → {_goto(rb, branch.goto, lang)}{note}")
    if step.default:
        out.append(f"{len(step.branches) + 1}. {h['default']} → {_goto(rb, step.default, lang)}")
    return [*out, ""]


def conclusion_section(c: Conclusion, lang: str, t: Callable[[Text | None], str]) -> list[str]:
    h = HEADINGS[lang]
    out = [f"### {t(c.title)} {{#{c.id}}}", "",
           f"**{h['severity']}:** {c.severity} · **{h['taxonomy']}:** {', '.join(c.taxonomy)}", "",
           t(c.explanation), ""]
    if c.fixes:
        out += [f"#### {h['fixes']}", ""]
        for fix in c.fixes:
            out += [f"**{t(fix.title)}** ({h['effect']}: {fix.effect})", ""]
            if fix.body:
                out += [t(fix.body), ""]
            if fix.run:
                out += ["```bash", fix.run, "```", ""]
    if c.see_also:
        links = [_see_also(link) for link in c.see_also]
        out += [f"{h['see']}: {', '.join(links)}", ""]
    return out


def _goto(rb: Runbook, target: str, lang: str) -> str:
    if ":" in target:
        rid, step = target.split(":", 1)
        anchor = "" if step == "start" else f"#{step}"
        return f"[{target}]({rid}.md{anchor})"
    node = rb.node(target)
    return f"[{node.title.get(lang) if node else target}](#{target})"


def _see_also(link: str) -> str:
    kind, _, rest = link.partition(":")
    target, _, anchor = rest.partition("#")
    return f"[{link}]({_linker('runbooks')(kind, target, f'#{anchor}' if anchor else '')})"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
