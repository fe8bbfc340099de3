"""Markdown to safe HTML for the site: raw HTML escaped, unsafe links dropped, headings anchored.

Runbook texts and articles come from pull requests, so nothing in them may run in a
reader's browser: markdown-it's `html` option is off (a `<script>` in the source comes
out as text) and its link validator refuses `javascript:`, `vbscript:`, `file:` and
`data:` URLs. Links to `runbook:ID` and `kb:SLUG` are rewritten to site URLs.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

_INTERNAL = re.compile(r"^(runbook|kb):([a-z0-9][a-z0-9-]*)(#.*)?$")
# Text with none of Markdown's special characters renders as itself: skip the parser.
_PLAIN = re.compile(r"[^\\`*_\[\]<>&#|~!\n\r\t]*")
_SLUG_DROP = re.compile(r"[^\w\- ]+")  # \w is Unicode-aware: CJK characters are kept


def slugify(text: str) -> str:
    """A heading's anchor: lower case, punctuation dropped, spaces to '-', CJK kept."""
    text = unicodedata.normalize("NFKC", text).strip().lower()
    text = _SLUG_DROP.sub("", text)
    return re.sub(r"[\s-]+", "-", text).strip("-") or "section"


@dataclass
class Heading:
    level: int
    text: str
    anchor: str


@dataclass
class Rendered:
    html: str
    headings: list[Heading] = field(default_factory=list)
    links: list[str] = field(default_factory=list)  # internal targets: "runbook:ID" / "kb:SLUG"


LinkResolver = Callable[[str, str, str], str]  # (kind, id, fragment) -> href


class MarkdownRenderer:
    """One configured markdown-it parser; `render` is called per document."""

    def __init__(self, resolve: LinkResolver) -> None:
        self._resolve = resolve
        self._md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
        self._md.enable("table")
        self._md.enable("strikethrough")
        # markdown-it binds each rule to its renderer: (renderer, tokens, idx, options, env).
        self._md.add_render_rule("heading_open", _heading_open)
        self._md.add_render_rule("heading_close", _heading_close)
        self._md.add_render_rule("link_open", self._link_rule())
        self._md.add_render_rule("fence", _fence)
        self._md.add_render_rule("table_open", _table_open)
        self._md.add_render_rule("table_close", _table_close)

    def render(self, text: str) -> Rendered:
        if _PLAIN.fullmatch(text) and text[:1].isalpha():  # not a list, quote or code block
            return Rendered(f"<p>{text}</p>\n")
        env: dict[str, Any] = {"headings": [], "used": set(), "links": []}
        tokens = self._md.parse(text, env)
        _assign_anchors(tokens, env)
        html = self._md.renderer.render(tokens, self._md.options, env)
        return Rendered(html, env["headings"], env["links"])

    def render_inline(self, text: str) -> str:
        """One paragraph's worth of text (titles, notes): inline Markdown only, no <p>."""
        if _PLAIN.fullmatch(text):
            return text.strip()
        return self._md.renderInline(text, {"headings": [], "used": set(), "links": []})

    def _link_rule(self) -> Callable[..., str]:
        resolve = self._resolve

        def link_open(renderer: RendererHTML, tokens: Sequence[Token], idx: int,
                      options: OptionsDict, env: EnvType) -> str:
            token = tokens[idx]
            href = str(token.attrGet("href") or "")
            internal = _INTERNAL.match(href)
            if internal:
                kind, target, fragment = internal.group(1), internal.group(2), internal.group(3) or ""
                env["links"].append(f"{kind}:{target}")
                token.attrSet("href", resolve(kind, target, fragment.lstrip("#")))
            elif re.match(r"^[a-z][a-z0-9+.-]*:", href, re.IGNORECASE):
                token.attrSet("rel", "noopener noreferrer")  # another site: no referrer, no opener
            return renderer.renderToken(tokens, idx, options, env)

        return link_open


def _heading_open(renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict,
                  env: EnvType) -> str:
    token = tokens[idx]
    return f'<{token.tag} id="{_attr(token.meta["anchor"])}">'


def _heading_close(renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict,
                   env: EnvType) -> str:
    anchor = _attr(tokens[idx].meta["anchor"])
    link = f'<a class="anchor" href="#{anchor}" aria-hidden="true" data-pagefind-ignore>#</a>'
    return f"{link}</{tokens[idx].tag}>\n"


def _fence(renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict,
           env: EnvType) -> str:
    token = tokens[idx]
    lang = token.info.strip().split(" ")[0] if token.info else ""
    css = f' class="language-{_attr(lang)}"' if re.fullmatch(r"[\w+-]+", lang) else ""
    return f'<pre class="code"><code{css}>{_text(token.content)}</code></pre>\n'


def _assign_anchors(tokens: list[Token], env: dict[str, Any]) -> None:
    """Give each heading a unique, Unicode-aware anchor (its text, slugified)."""
    for i, token in enumerate(tokens):
        if token.type != "heading_open":
            continue
        inline = tokens[i + 1]
        text = "".join(child.content for child in inline.children or [] if child.type in
                       ("text", "code_inline"))
        anchor = base = slugify(text)
        n = 2
        while anchor in env["used"]:
            anchor, n = f"{base}-{n}", n + 1
        env["used"].add(anchor)
        token.meta["anchor"] = tokens[i + 2].meta["anchor"] = anchor  # open, inline, close
        env["headings"].append(Heading(int(token.tag[1]), text, anchor))


def _table_open(renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict,
                env: EnvType) -> str:
    return '<div class="table-wrap"><table>\n'  # wide tables scroll on a phone


def _table_close(renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict,
                 env: EnvType) -> str:
    return "</table></div>\n"


def _text(value: str) -> str:
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _attr(value: str) -> str:
    return _text(value).replace('"', "&quot;")
