"""The runbooks and the knowledge-base articles as MCP resources, each in English and 中文:

    runbook://runbooks/{runbook_id}/{lang}   the tree as text (what `runbook show` prints)
    runbook://kb/{article}/{lang}            the article, Markdown

Both are templates (any id on the search path, read when asked), and every runbook and article
the server found at start is listed as a resource of its own, so a client can show them.
"""

from __future__ import annotations

from functools import partial

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError
from mcp.server.mcpserver.resources import FunctionResource

from runbook.format.model import LANGS
from runbook.format.problems import did_you_mean
from runbook.library.kb import KnowledgeBase, load_kb
from runbook.library.lazy import open_library
from runbook.library.outline import runbook_outline
from runbook.library.runbooks import load_library
from runbook.versions.pins import RunbookNotFound, resolve_runbook

RUNBOOK_URI = "runbook://runbooks/{runbook_id}/{lang}"
ARTICLE_URI = "runbook://kb/{article}/{lang}"


def read_runbook(runbook_id: str, lang: str) -> str:
    _check_lang(lang)
    try:
        return runbook_outline(resolve_runbook(runbook_id, open_library()), lang)
    except RunbookNotFound as exc:
        raise ResourceNotFoundError(exc.one_line()) from None


def read_article(article: str, lang: str) -> str:
    _check_lang(lang)
    kb = load_kb()
    found = kb.article(article, lang)
    if found is None:
        raise ResourceNotFoundError(f"no article {article!r}{did_you_mean(article, kb.articles)} "
                                    "(search finds articles by words)")
    return f"# {found.title}\n\n{found.body.strip()}\n"


def _check_lang(lang: str) -> None:
    if lang not in LANGS:
        raise ResourceNotFoundError(f"no language {lang!r}: use {' or '.join(LANGS)}")


def register_resources(server: MCPServer) -> None:
    server.resource(RUNBOOK_URI, name="runbook", title="A runbook, as text",
                    description="A runbook's tree in one language (en or zh)",
                    mime_type="text/plain")(read_runbook)
    server.resource(ARTICLE_URI, name="article", title="A knowledge-base article",
                    description="A knowledge-base article in one language (en or zh)",
                    mime_type="text/markdown")(read_article)
    for runbook in load_library().runbooks():
        for lang in LANGS:
            server.add_resource(FunctionResource(
                uri=RUNBOOK_URI.format(runbook_id=runbook.id, lang=lang), name=f"{runbook.id}.{lang}",
                title=runbook.title.get(lang), description=runbook.summary.get(lang), mime_type="text/plain",
                fn=partial(read_runbook, runbook.id, lang)))
    _register_articles(server, load_kb())


def _register_articles(server: MCPServer, kb: KnowledgeBase) -> None:
    for slug, versions in sorted(kb.articles.items()):
        for lang, article in versions.items():
            server.add_resource(FunctionResource(
                uri=ARTICLE_URI.format(article=slug, lang=lang), name=f"kb:{slug}.{lang}",
                title=article.title, description=article.summary, mime_type="text/markdown",
                fn=partial(read_article, slug, lang)))
