"""A runbook's decision tree as an inline SVG flowchart, laid out in pure Python at site-build time.

The layout is the classic layered (Sugiyama) one, small enough to read in one sitting:

1. rank: longest path from `start` over the steps, back edges (loops) found by a DFS and ignored;
   a conclusion or hand-over sits one rank below its deepest predecessor; a rank wider than
   `MAX_ROW_WIDTH` pushes its conclusions down, so big trees grow taller rather than wider.
2. ranks are doubled, and every edge is threaded through one item per rank it crosses: its
   label right next to its arrowhead, bend points elsewhere. Labels and long edges are laid out
   like boxes, so they never sit on a node, and the labels of a wide fan-out spread over rows.
3. order within ranks: barycenter sweeps (the best of a few kept), then adjacent swaps.
4. x: per rank, the positions closest to where the neighbours (and, weakly, the middle) pull
   that keep the order and the gaps: a weighted isotonic regression, swept up and down; then
   each long edge's bend points are lined up. y: rows as tall as their tallest item.
5. edges: S-curves between rows, straight through bend points, an arrowhead at the end.

Colours live in CSS only (`FLOWCHART_CSS`, embedded with zero specificity), so the site's
stylesheet can theme the chart for dark mode and print.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import pairwise
from xml.sax.saxutils import escape

from runbook.format.model import Runbook
from runbook.i18n.textwidth import width

# Sizes in px of the viewBox. The text measures are deliberately a bit generous.
NODE_W = 184.0
NODE_COLS = 22  # title columns per line (CJK counts 2)
NODE_LINES = 3
NODE_FONT, NODE_LINE = 13, 16
SUB_FONT, SUB_LINE = 11, 14
NODE_PAD = 8.0
LABEL_SHORTEN = 40  # a branch note is cut to ~40 columns (ellipsis), then wrapped
LABEL_COLS, LABEL_LINES = 16, 3
LABEL_FONT, LABEL_LINE = 11, 13
LABEL_COL_PX = 6.3
LABEL_PAD = 4.0
GAP_NODE, GAP_SMALL = 24.0, 10.0  # between two boxes / when a bend point is involved
MAX_ROW_WIDTH = 3 * NODE_W + 2 * GAP_NODE  # three boxes a row: wider trees grow downwards
MARGIN = 12.0
LOOP_W = 40.0  # room right of a node for a step that loops to itself
SWEEPS = 8
CENTER_PULL = 2.0  # how hard every item is pulled to the middle: keeps subtrees from drifting apart
STRAIGHTEN_PASSES = 3

UI = {
    "en": {"otherwise": "otherwise", "aria": "Decision tree of {title}: {steps} steps, {ends} conclusions",
           "ok": "OK", "info": "Info", "warning": "Warning", "critical": "Critical", "runbook": "Runbook"},
    "zh": {"otherwise": "否则", "aria": "{title}的决策树：{steps} 个步骤，{ends} 个结论",
           "ok": "正常", "info": "提示", "warning": "警告", "critical": "严重", "runbook": "Runbook"},
}

FONT_FAMILY = ("system-ui, -apple-system, 'Segoe UI', Roboto, 'Noto Sans', 'PingFang SC', "
               "'Microsoft YaHei', sans-serif")

# Zero-specificity defaults (`:where`) any site rule overrides; colours follow the text colour
# (currentColor) so they work on light and dark pages alike; --fc-* variables retune them.
FLOWCHART_CSS = """\
:where(.fc text){fill:currentColor}
:where(.fc .fc-sub){fill-opacity:.7;font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
:where(.fc .fc-node>rect){fill:var(--fc-step-bg,currentColor);fill-opacity:var(--fc-fill-opacity,.06);\
stroke:var(--fc-step-border,currentColor);stroke-opacity:.6;stroke-width:1.2}
:where(.fc .fc-start>rect){stroke-width:2.4;stroke-opacity:.9}
:where(.fc .fc-sev-ok>rect){fill:var(--fc-ok,#2da44e);stroke:var(--fc-ok,#2da44e);fill-opacity:.15;\
stroke-opacity:1}
:where(.fc .fc-sev-info>rect){fill:var(--fc-info,#3b82f6);stroke:var(--fc-info,#3b82f6);\
fill-opacity:.15;stroke-opacity:1}
:where(.fc .fc-sev-warning>rect){fill:var(--fc-warning,#d29922);stroke:var(--fc-warning,#d29922);\
fill-opacity:.18;stroke-opacity:1}
:where(.fc .fc-sev-critical>rect){fill:var(--fc-critical,#e5534b);stroke:var(--fc-critical,#e5534b);\
fill-opacity:.18;stroke-opacity:1;stroke-width:1.8}
:where(.fc .fc-external>rect,.fc .fc-missing>rect){fill:none;stroke-dasharray:4 3}
:where(.fc .fc-unreachable){opacity:.55}
:where(.fc a:hover>.fc-node>rect,.fc a:focus>.fc-node>rect){stroke-width:3;stroke-opacity:1}
:where(.fc .fc-edge>path){fill:none;stroke:var(--fc-edge,currentColor);stroke-opacity:.55;stroke-width:1.3}
:where(.fc .fc-edge-default>path){stroke-dasharray:5 4}
:where(.fc .fc-edge:hover>path){stroke-opacity:1;stroke-width:2}
:where(.fc .fc-arrowhead){fill:var(--fc-edge,currentColor);fill-opacity:.7}
:where(.fc .fc-label-bg){fill:var(--fc-bg,Canvas);fill-opacity:.92}
:where(.fc .fc-label text){fill-opacity:.8}
:where(.fc .fc-label-default text){font-style:italic}
@media print{:where(.fc .fc-node>rect){fill-opacity:0}:where(.fc .fc-label-bg){fill:#fff}}
"""

_WIDE = "WF"
_NO_LINE_START = set("，。、；：！？）」』】》〉…,.;:!?)]}%")
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_SOFT_BREAK = "-/_.("
_TRAILING = " ,;:-/，、；："  # not worth keeping before an ellipsis


def default_anchor(node_id: str) -> str:
    """The page anchor of a step or conclusion: its id."""
    return node_id


def default_runbook_href(runbook_id: str, step_id: str) -> str:
    """The link to a step or conclusion of another runbook, from a runbook's page.

    `other:start` means that runbook's start step, which its page begins with: no anchor.
    """
    return f"../{runbook_id}/" if step_id == "start" else f"../{runbook_id}/#{step_id}"


# ---------------------------------------------------------------- text


@lru_cache(maxsize=4096)
def _char_width(ch: str) -> int:
    return width(ch)  # the terminal's rule: CJK takes two columns


def _width(text: str) -> int:
    return len(text) if text.isascii() else sum(map(_char_width, text))


def _prefix(text: str, cols: int) -> str:
    """The longest start of `text` at most `cols` columns wide."""
    used = 0
    for i, ch in enumerate(text):
        used += _char_width(ch)
        if used > cols:
            return text[:i]
    return text


def _tokens(text: str) -> list[str]:
    """Words, single CJK characters (each a break opportunity) and " " for a space."""
    tokens: list[str] = []
    word = ""
    for ch in " ".join(text.split()):
        if ch == " " or unicodedata.east_asian_width(ch) in _WIDE:
            tokens += [word] if word else []
            word = ""
            if ch in _NO_LINE_START and tokens and tokens[-1] != " ":
                tokens[-1] += ch  # closing punctuation stays with what it closes
            else:
                tokens.append(ch)
        elif not word and ch in _NO_LINE_START and tokens and tokens[-1] != " ":
            tokens[-1] += ch
        else:
            word += ch
    return tokens + ([word] if word else [])


def _split_long(token: str, cols: int) -> list[str]:
    """A token wider than a line, cut into line-sized pieces, after - / _ . where possible."""
    pieces: list[str] = []
    while _width(token) > cols:
        cut = max(1, len(_prefix(token, cols)))
        soft = max(token.rfind(c, 0, cut) for c in _SOFT_BREAK)
        cut = soft + 1 if soft >= cols // 3 else cut
        pieces.append(token[:cut])
        token = token[cut:]
    return pieces + [token]


def wrap(text: str, cols: int, max_lines: int) -> list[str]:
    """`text` in lines of at most `cols` display columns; past `max_lines` it ends in an ellipsis.

    Lines are balanced: the narrowest measure that needs no more lines wins, so a title does not
    end in one lonely word or character.
    """
    return list(_wrap(text, cols, max_lines))


@lru_cache(maxsize=16384)
def _wrap(text: str, cols: int, max_lines: int) -> tuple[str, ...]:
    tokens = _tokens(text)  # once: the balancing below tries up to a third of `cols` measures
    lines = _greedy(tokens, cols)
    if len(lines) <= max_lines:
        for narrower in range(cols - 1, cols * 2 // 3, -1):
            tighter = _greedy(tokens, narrower)
            if len(tighter) > len(lines):
                break
            lines = tighter
    return tuple(_truncate(lines, cols, max_lines))


def _greedy(tokens: list[str], cols: int) -> list[str]:
    lines: list[str] = []
    line, used, space = "", 0, False
    for token in tokens:
        if token == " ":
            space = bool(line)
            continue
        need = _width(token) + space
        if used + need <= cols:
            line, used, space = line + " " * space + token, used + need, False
            continue
        lines += [line] if line else []
        *full, line = _split_long(token, cols)
        lines, used, space = lines + full, _width(line), False
    return lines + [line] if line else lines


def shorten(text: str, cols: int) -> str:
    """`text` cut to about `cols` display columns, at a word where there is one, with an ellipsis."""
    text = " ".join(text.split())
    if _width(text) <= cols:
        return text
    cut = _prefix(text, cols - 1)
    if " " in cut[len(cut) * 2 // 3:]:  # a word boundary near the end: cut there
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip(_TRAILING) + "…"


def _truncate(lines: list[str], cols: int, max_lines: int) -> list[str]:
    if len(lines) <= max_lines:
        return lines
    last = lines[max_lines - 1]
    while last and _width(last) + 1 > cols:
        last = last.rsplit(" ", 1)[0] if " " in last else last[:-1]
    return [*lines[:max_lines - 1], last.rstrip(_TRAILING) + "…"]


def _clean(text: str) -> str:
    """Text safe to put in XML: escaped by the caller, but control characters XML forbids go here."""
    return text if text.isprintable() else _XML_INVALID.sub("", text)


@lru_cache(maxsize=65536)
def _attr(value: str) -> str:
    """A double-quoted, escaped XML attribute value."""
    return '"' + _text(value).replace('"', "&quot;").replace("\n", "&#10;").replace("\t", "&#9;") + '"'


def _text(value: str) -> str:
    return escape(_clean(value))


@lru_cache(maxsize=65536)
def _num(value: float) -> str:
    """Coordinates with one decimal, `-0` and trailing zeros removed: stable, short output."""
    text = f"{round(value, 1) + 0.0:.1f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


# ---------------------------------------------------------------- the graph


@dataclass(eq=False)
class _Item:
    """A box in the layout: a node, an edge label, or a bend point of a long edge."""

    key: str
    kind: str  # step | conclusion | external | missing | label | bend
    rank: int = 0
    w: float = 0.0  # the room it takes in its row (a node's box plus a self-loop)
    h: float = 0.0
    box_w: float = 0.0  # the drawn box
    x: float = 0.0  # centre of the room
    y: float = 0.0  # centre
    lines: list[str] = field(default_factory=list)
    sub: str = ""
    classes: list[str] = field(default_factory=list)
    title: str = ""
    up: list[tuple[_Item, float]] = field(default_factory=list)  # neighbours a rank above, weighted
    down: list[tuple[_Item, float]] = field(default_factory=list)
    pos: int = 0  # index in its rank

    def __post_init__(self) -> None:
        self.is_node = self.kind not in ("label", "bend")  # read very often while placing: a plain field

    @property
    def box_x(self) -> float:
        return self.x - (self.w - self.box_w) / 2


@dataclass(eq=False)
class _Edge:
    src: str
    dst: str
    kind: str  # branch | default
    index: int  # the branch's index in its step; -1 for the default
    note: str  # the full label text ("" when the branch has no note)
    when: str
    back: bool = False  # closes a loop: drawn upwards, ignored for ranking
    chain: list[_Item] = field(default_factory=list)  # top to bottom, real nodes at both ends
    label: _Item | None = None

    @property
    def loop(self) -> bool:
        return self.src == self.dst


def _node_item(key: str, kind: str, title: str, sub: str, classes: list[str]) -> _Item:
    lines = wrap(title, NODE_COLS, NODE_LINES) or [""]
    h = 2 * NODE_PAD + len(lines) * NODE_LINE + SUB_LINE
    return _Item(key, kind, w=NODE_W, h=h, box_w=NODE_W, lines=lines,
                 sub=wrap(sub, NODE_COLS + 4, 1)[0] if sub else "", classes=classes, title=title)


def _build(rb: Runbook, lang: str) -> tuple[dict[str, _Item], list[_Edge]]:
    ui = UI.get(lang, UI["en"])
    nodes: dict[str, _Item] = {}
    for step in rb.steps.values():
        classes = ["fc-step"] + (["fc-start"] if step.id == rb.start else [])
        nodes[step.id] = _node_item(step.id, "step", step.title.get(lang), step.id, classes)
    for end in rb.conclusions.values():
        nodes[end.id] = _node_item(end.id, "conclusion", end.title.get(lang), ui.get(end.severity, ""),
                                   ["fc-conclusion", f"fc-sev-{end.severity}"])
    edges = list(_edges(rb, lang, ui["otherwise"]))
    for edge in edges:
        if edge.dst not in nodes:
            other, _, step_id = edge.dst.partition(":")
            kind = "external" if step_id else "missing"
            nodes[edge.dst] = _node_item(edge.dst, kind, f"{ui['runbook']}: {other}" if step_id else other,
                                         f"→ {step_id}" if step_id else "?", [f"fc-{kind}"])
    return nodes, edges


def _edges(rb: Runbook, lang: str, otherwise: str) -> Iterable[_Edge]:
    for step in rb.steps.values():
        for i, branch in enumerate(step.branches):
            note = branch.note.get(lang) if branch.note else ""
            yield _Edge(step.id, branch.goto, "branch", i, note, branch.when)
        if step.default:
            yield _Edge(step.id, step.default, "default", -1, otherwise, "")


def _reachable(start: str, edges: list[_Edge]) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        here = todo.pop()
        for edge in edges:
            if edge.src == here and edge.dst not in seen:
                seen.add(edge.dst)
                todo.append(edge.dst)
    return seen


# ---------------------------------------------------------------- 1. ranks


def _out_edges(nodes: dict[str, _Item], edges: list[_Edge]) -> dict[str, list[_Edge]]:
    out: dict[str, list[_Edge]] = {key: [] for key in nodes}
    for edge in edges:
        out[edge.src].append(edge)
    return out


def _mark_back_edges(roots: list[str], out: dict[str, list[_Edge]]) -> list[str]:
    """Marks the edges that close a loop (iterative DFS); returns the steps in topological order."""
    state: dict[str, int] = {}  # 1: on the DFS stack, 2: done
    finished: list[str] = []
    for root in roots:
        if root in state:
            continue
        state[root] = 1
        stack = [(root, iter(out[root]))]
        while stack:
            here, todo = stack[-1]
            edge = next(todo, None)
            if edge is None:
                state[here] = 2
                finished.append(here)
                stack.pop()
            elif state.get(edge.dst) == 1:
                edge.back = True
            elif edge.dst not in state:
                state[edge.dst] = 1
                stack.append((edge.dst, iter(out[edge.dst])))
    return finished[::-1]


def _rank(rb: Runbook, nodes: dict[str, _Item], edges: list[_Edge]) -> None:
    out = _out_edges(nodes, edges)
    roots = [rb.start, *(s for s in rb.steps if s != rb.start)] if rb.start in nodes else list(rb.steps)
    for key in _mark_back_edges(roots, out):  # longest path: every forward edge goes down
        for edge in out[key]:
            if not edge.back:
                nodes[edge.dst].rank = max(nodes[edge.dst].rank, nodes[key].rank + 1)
    fed = {edge.dst for edge in edges if not edge.back}
    bottom = max((n.rank for n in nodes.values() if n.key in fed or n.kind == "step"), default=0) + 1
    for node in nodes.values():  # a conclusion nothing leads to still gets drawn, at the bottom
        if node.kind != "step" and node.key not in fed:
            node.rank = bottom
    _limit_width(nodes, out)


def _limit_width(nodes: dict[str, _Item], out: dict[str, list[_Edge]]) -> None:
    """Pushes ends (then steps) of an over-wide rank one rank down, so the chart grows downwards."""
    rank = 0
    while rank <= max(n.rank for n in nodes.values()):
        row = [n for n in nodes.values() if n.rank == rank]
        while len(row) > 1 and sum(n.w for n in row) + GAP_NODE * (len(row) - 1) > MAX_ROW_WIDTH:
            ends = [n for n in row if not out[n.key]]
            victim = (ends or row)[-1]
            row.remove(victim)
            victim.rank += 1
            _push_down(victim, nodes, out)
        rank += 1


def _push_down(node: _Item, nodes: dict[str, _Item], out: dict[str, list[_Edge]]) -> None:
    for edge in out[node.key]:
        child = nodes[edge.dst]
        if not edge.back and child.rank <= node.rank:
            child.rank = node.rank + 1
            _push_down(child, nodes, out)


# ---------------------------------------------------------------- 2. labels and bend points


def _label_item(edge: _Edge, rank: int) -> _Item:
    lines = wrap(shorten(edge.note, LABEL_SHORTEN), LABEL_COLS, LABEL_LINES) if edge.note else []
    w = max((_width(line) for line in lines), default=0) * LABEL_COL_PX + 2 * LABEL_PAD
    h = len(lines) * LABEL_LINE + 2 * LABEL_PAD
    item = _Item(f"{edge.src}>{edge.index}@{rank}", "label" if lines else "bend", rank, w if lines else 0,
                 h if lines else 0, w if lines else 0, lines=lines)
    item.classes = ["fc-label", f"fc-label-{edge.kind}"]
    return item


def _chains(nodes: dict[str, _Item], edges: list[_Edge]) -> list[list[_Item]]:
    """Doubles the ranks and threads every edge through one item per rank it crosses."""
    for node in nodes.values():
        node.rank *= 2
    items = list(nodes.values())
    for edge in edges:
        if edge.loop:
            _room_for_loop(nodes[edge.src], edge)
            continue
        src, dst = nodes[edge.src], nodes[edge.dst]
        top, bottom = (dst, src) if edge.back else (src, dst)
        label_rank = dst.rank + 1 if edge.back else dst.rank - 1  # next to the arrowhead
        edge.chain = [top]
        for rank in range(top.rank + 1, bottom.rank):
            if rank == label_rank:
                edge.label = _label_item(edge, rank)
                edge.chain.append(edge.label)
            else:
                edge.chain.append(_Item(f"{edge.src}>{edge.index}@{rank}", "bend", rank))
        edge.chain.append(bottom)
        items += edge.chain[1:-1]
        _link(edge.chain)
    ranks: list[list[_Item]] = [[] for _ in range(max(i.rank for i in items) + 1)]
    for item in items:
        ranks[item.rank].append(item)
    return ranks


def _room_for_loop(node: _Item, edge: _Edge) -> None:
    edge.label = _label_item(edge, node.rank)
    node.w += LOOP_W + edge.label.w


def _link(chain: list[_Item]) -> None:
    # Heavier pull between bend points keeps long edges straight (as in dot: 1, 2, 8).
    for a, b in pairwise(chain):
        weight = 1.0 if a.is_node and b.is_node else 8.0 if not (a.is_node or b.is_node) else 2.0
        a.down.append((b, weight))
        b.up.append((a, weight))


# ---------------------------------------------------------------- 3. order within ranks


def _renumber(row: list[_Item]) -> None:
    for i, item in enumerate(row):
        item.pos = i


def _barycenter(item: _Item, side: list[tuple[_Item, float]]) -> float:
    return sum(other.pos for other, _ in side) / len(side) if side else float(item.pos)


def _crossings(ranks: list[list[_Item]]) -> int:
    total = 0
    for row in ranks[:-1]:
        # Segments ordered by their upper end cross where their lower ends are out of order:
        # count, from the right, the lower ends already seen that are smaller.
        segments = sorted((a.pos, b.pos) for a in row for b, _ in a.down)
        seen: list[int] = []
        for _, low in reversed(segments):
            where = bisect_left(seen, low)
            total += where
            seen.insert(where, low)
    return total


def _pair_crossings(u: _Item, v: _Item) -> tuple[int, int]:
    """Crossings between the edges of u and those of v while u stands left of v, and while v does."""
    u_left = v_left = 0
    for u_side, v_side in ((u.up, v.up), (u.down, v.down)):
        for a, _ in u_side:
            for b, _ in v_side:
                if a.pos > b.pos:
                    u_left += 1
                elif a.pos < b.pos:
                    v_left += 1
    return u_left, v_left


def _order(ranks: list[list[_Item]]) -> None:
    for row in ranks:
        _renumber(row)
    best, fewest = [list(row) for row in ranks], _crossings(ranks)
    before = best
    for sweep in range(SWEEPS):
        down = sweep % 2 == 0
        for r in range(1, len(ranks)) if down else range(len(ranks) - 2, -1, -1):
            ranks[r].sort(key=lambda i: _barycenter(i, i.up if down else i.down))
            _renumber(ranks[r])
        crossings = _crossings(ranks)
        if crossings < fewest:
            best, fewest = [list(row) for row in ranks], crossings
        if not down:  # a pair of sweeps that changed no order would change none again
            now = [list(row) for row in ranks]
            if now == before:
                break
            before = now
    for r, row in enumerate(best):
        ranks[r] = row
        _renumber(row)
    _transpose(ranks)


def _transpose(ranks: list[list[_Item]]) -> None:
    """Swaps neighbours in a rank while that removes crossings."""
    for _ in range(len(ranks)):
        improved = False
        for row in ranks:
            for i in range(len(row) - 1):
                u, v = row[i], row[i + 1]
                u_left, v_left = _pair_crossings(u, v)
                if v_left < u_left:
                    row[i], row[i + 1] = v, u
                    u.pos, v.pos = i + 1, i
                    improved = True
        if not improved:
            return


# ---------------------------------------------------------------- 4. coordinates


def _gap(a: _Item, b: _Item) -> float:
    return (a.w + b.w) / 2 + (GAP_NODE if a.is_node and b.is_node else GAP_SMALL)


def _offsets(row: list[_Item]) -> list[float]:
    """Each item's distance from the first when they stand as close as the gaps allow."""
    offsets = [0.0] if row else []
    for a, b in pairwise(row):
        offsets.append(offsets[-1] + _gap(a, b))
    return offsets


def _place_row(row: list[_Item], wanted: list[float], weights: list[float], offsets: list[float]) -> None:
    """Positions nearest `wanted` (weighted least squares) that keep the order and the gaps.

    With offsets o_i (the sum of the gaps before item i) and y_i = x_i - o_i, the constraints become
    y non-decreasing: an isotonic regression, solved by pooling adjacent violators.
    """
    # The pooled blocks, left to right: their weights, weighted sums and sizes.
    weight_of: list[float] = []
    sum_of: list[float] = []
    size_of: list[int] = []
    for want, offset, weight in zip(wanted, offsets, weights, strict=True):
        total, size = weight * (want - offset), 1
        while weight_of and sum_of[-1] / weight_of[-1] > total / weight:
            weight = weight_of.pop() + weight
            total = sum_of.pop() + total
            size = size_of.pop() + size
        weight_of.append(weight)
        sum_of.append(total)
        size_of.append(size)
    i = 0
    for weight, total, size in zip(weight_of, sum_of, size_of, strict=True):
        for _ in range(size):
            row[i].x = total / weight + offsets[i]
            i += 1


def _pulls(row: list[_Item], up: bool, down: bool) -> tuple[list[float], list[float]]:
    """Where the neighbours above and/or below (and, weakly, the middle at x=0) want each item,
    and how hard they pull."""
    wanted: list[float] = []
    weights: list[float] = []
    for item in row:
        total = 0.0
        moment = 0.0
        for side in (item.up if up else (), item.down if down else ()):
            for other, weight in side:
                total += weight
                moment += other.x * weight
        total += CENTER_PULL
        wanted.append(moment / total)
        weights.append(total)
    return wanted, weights


def _place_x(ranks: list[list[_Item]]) -> None:
    offsets = [_offsets(row) for row in ranks]  # the order and widths stay: so do the gaps
    for row, row_offsets in zip(ranks, offsets, strict=True):
        _place_row(row, [0.0] * len(row), [1.0] * len(row), row_offsets)
    before = _xs(ranks)
    for sweep in range(SWEEPS):
        down = sweep % 2 == 0
        order = range(len(ranks)) if down else range(len(ranks) - 1, -1, -1)
        for r in order:
            _place_row(ranks[r], *_pulls(ranks[r], down, not down), offsets[r])
        if not down:  # a pair of sweeps that moved nothing would move nothing again
            now = _xs(ranks)
            if now == before:
                break
            before = now
    for r, row in enumerate(ranks):  # the last pass listens to both sides
        _place_row(row, *_pulls(row, True, True), offsets[r])
    _straighten(ranks)
    left = min(item.x - item.w / 2 for row in ranks for item in row)
    for row in ranks:
        for item in row:
            item.x += MARGIN - left


def _xs(ranks: list[list[_Item]]) -> list[float]:
    return [item.x for row in ranks for item in row]


def _room(item: _Item, row: list[_Item]) -> tuple[float, float]:
    i = item.pos
    low = row[i - 1].x + _gap(row[i - 1], item) if i > 0 else -1e9
    high = row[i + 1].x - _gap(item, row[i + 1]) if i + 1 < len(row) else 1e9
    return low, high


def _straighten(ranks: list[list[_Item]]) -> None:
    """Puts every run of bend points on one vertical line, in as few pieces as their rows allow."""
    runs: list[list[_Item]] = []
    seen: set[int] = set()
    for row in ranks:
        for item in row:
            if item.is_node or id(item) in seen:
                continue
            run = [item]
            while len(run[-1].down) == 1 and not run[-1].down[0][0].is_node:
                run.append(run[-1].down[0][0])
            seen.update(id(i) for i in run)
            runs.append(run)
    runs.sort(key=len, reverse=True)
    before = _xs(ranks)
    for _ in range(STRAIGHTEN_PASSES):
        for run in runs:
            start = 0
            while start < len(run):
                start = _straighten_piece(run, start, ranks)
        now = _xs(ranks)
        if now == before:  # a pass that moved nothing would move nothing again
            break
        before = now


def _straighten_piece(run: list[_Item], start: int, ranks: list[list[_Item]]) -> int:
    low, high, end = -1e9, 1e9, start
    while end < len(run):
        room_low, room_high = _room(run[end], ranks[run[end].rank])
        if max(low, room_low) > min(high, room_high):
            break
        low, high, end = max(low, room_low), min(high, room_high), end + 1
    if end == start:  # no room to move at all (rounding): leave it where it is
        return start + 1
    piece = run[start:end]
    xs = sorted(i.x for i in piece)
    x = min(max(xs[len(xs) // 2], low), high)
    for item in piece:
        item.x = x
    return end


def _place_y(ranks: list[list[_Item]]) -> tuple[list[float], list[float]]:
    """Centres every item in its row; returns each row's top and bottom."""
    tops, bottoms = [], []
    y = MARGIN
    for r, row in enumerate(ranks):
        if r:
            y += _row_gap(ranks[r - 1])
        height = max((item.h for item in row), default=0.0)
        for item in row:
            item.y = y + height / 2
        tops.append(y)
        y += height
        bottoms.append(y)
    return tops, bottoms


def _row_gap(row: list[_Item]) -> float:
    # Wide sideways moves need height to curve smoothly; straight drops need little.
    dx = max((abs(a.x - b.x) for a in row for b, _ in a.down), default=0.0)
    return min(56.0, max(14.0, 0.18 * dx))


def _ports(nodes: Iterable[_Item]) -> dict[tuple[str, str], float]:
    """Where each edge leaves or enters a node: spread along its side, in the order of their ends."""
    ports: dict[tuple[str, str], float] = {}
    for node in nodes:
        for side in (node.up, node.down):
            others = sorted((other for other, _ in side), key=lambda o: (o.x, o.pos))
            step = min(14.0, (node.box_w - 32) / max(1, len(others) - 1))
            for i, other in enumerate(others):
                ports[(node.key, other.key)] = node.box_x + (i - (len(others) - 1) / 2) * step
    return ports


def _place_loop_label(node: _Item, label: _Item) -> None:
    label.x = node.box_x + node.box_w / 2 + LOOP_W + label.w / 2 - GAP_SMALL / 2
    label.y = node.y


# ---------------------------------------------------------------- 5. SVG


@dataclass
class _Canvas:
    ports: dict[tuple[str, str], float]
    tops: list[float]
    bottoms: list[float]
    marker: str


def _tag(name: str, attrs: dict[str, str | float], body: str | None = None) -> str:
    """One element; every attribute value is escaped, numbers are written short."""
    # A number written by _num needs no escaping.
    text = "".join(f' {key}="{_num(value)}"' if isinstance(value, float) else f" {key}={_attr(str(value))}"
                   for key, value in attrs.items())
    return f"<{name}{text}/>" if body is None else f"<{name}{text}>{body}</{name}>"


def _point(x: float, y: float) -> str:
    return f"{_num(x)},{_num(y)}"


def _segments(edge: _Edge, canvas: _Canvas) -> list[tuple[float, float, float, float]]:
    """The pieces of an edge between rows, in the direction its arrow points."""
    pieces = []
    for a, b in pairwise(edge.chain):
        x0 = canvas.ports[(a.key, b.key)] if a.is_node else a.x
        y0 = a.y + a.h / 2 if a.is_node else canvas.bottoms[a.rank]
        x1 = canvas.ports[(b.key, a.key)] if b.is_node else b.x
        y1 = b.y - b.h / 2 if b.is_node else canvas.tops[b.rank]
        pieces.append((x0, y0, x1, y1))
    return [(x1, y1, x0, y0) for x0, y0, x1, y1 in reversed(pieces)] if edge.back else pieces


def _edge_path(edge: _Edge, canvas: _Canvas, node: _Item) -> str:
    if edge.loop:  # out of the right side and back in
        right, y = node.box_x + node.box_w / 2, node.y
        bulge = right + LOOP_W * 0.85
        return (f"M{_point(right, y - 10)}C{_point(bulge, y - 28)} {_point(bulge, y + 28)} "
                f"{_point(right, y + 10)}")
    path: list[str] = []
    for x0, y0, x1, y1 in _segments(edge, canvas):
        # Straight down through a bend point's row, an S-curve with vertical ends between rows.
        middle = (y0 + y1) / 2
        path.append(f"{'L' if path else 'M'}{_point(x0, y0)}")
        path.append(f"C{_point(x0, middle)} {_point(x1, middle)} {_point(x1, y1)}")
    return "".join(path)


def _edge_svg(edge: _Edge, canvas: _Canvas, node: _Item) -> str:
    classes = ["fc-edge", f"fc-edge-{edge.kind}"]
    classes += ["fc-edge-loop"] if edge.loop else ["fc-edge-back"] if edge.back else []
    tip = edge.note or edge.when
    attrs: dict[str, str | float] = {"d": _edge_path(edge, canvas, node), "fill": "none",
                                     "marker-end": f"url(#{canvas.marker})"}
    if edge.kind == "default":  # dashed even where no stylesheet reaches (feed readers, saved files)
        attrs["stroke-dasharray"] = "5 4"
    path = _tag("path", attrs)
    return _tag("g", {"class": " ".join(classes), "data-from": edge.src, "data-to": edge.dst,
                      "data-kind": edge.kind, "data-index": edge.index},
                (_tag("title", {}, _text(tip)) if tip else "") + path)


def _lines(lines: list[str], attrs: dict[str, str | float], cx: float, first: float, step: float) -> str:
    spans = "".join(_tag("tspan", {"x": cx, "y": first + i * step}, _text(line))
                    for i, line in enumerate(lines))
    return _tag("text", {"text-anchor": "middle", **attrs}, spans)


def _label_svg(edge: _Edge) -> str:
    label = edge.label
    if label is None or not label.lines:
        return ""
    left, top = label.x - label.w / 2, label.y - label.h / 2
    box = _tag("rect", {"class": "fc-label-bg", "x": left, "y": top, "width": label.w, "height": label.h,
                        "rx": 3})
    baseline = top + LABEL_PAD + LABEL_FONT - 1
    text = _lines(label.lines, {"font-size": LABEL_FONT}, label.x, baseline, LABEL_LINE)
    return _tag("g", {"class": " ".join(label.classes)}, _tag("title", {}, _text(edge.note)) + box + text)


def _node_svg(node: _Item, href: str | None) -> str:
    left, top = node.box_x - node.box_w / 2, node.y - node.h / 2
    box = _tag("rect", {"x": left, "y": top, "width": node.box_w, "height": node.h,
                        "rx": 14 if node.kind == "conclusion" else 4})
    baseline = top + NODE_PAD + NODE_FONT - 1
    title = _lines(node.lines, {"font-size": NODE_FONT}, node.box_x, baseline, NODE_LINE)
    sub = _lines([node.sub], {"class": "fc-sub fc-sub-id" if node.kind == "step" else "fc-sub",
                              "font-size": SUB_FONT},
                 node.box_x, top + NODE_PAD + len(node.lines) * NODE_LINE + SUB_FONT, 0)
    body = _tag("g", {"class": " ".join(["fc-node", *node.classes]), "data-id": node.key},
                _tag("title", {}, _text(node.title)) + box + title + sub)
    return _tag("a", {"href": href}, body) if href is not None else body


def _href(node: _Item, anchor: Callable[[str], str], runbook_href: Callable[[str, str], str]) -> str | None:
    if node.kind in ("step", "conclusion"):
        return "#" + anchor(node.key)
    if node.kind == "external":
        other, _, step_id = node.key.partition(":")
        return runbook_href(other, step_id)
    return None  # a goto to nothing (lint reports it): drawn, but links nowhere


def _layout(runbook: Runbook, lang: str) -> tuple[dict[str, _Item], list[_Edge], list[list[_Item]], _Canvas]:
    nodes, edges = _build(runbook, lang)
    reachable = _reachable(runbook.start, edges)
    for node in nodes.values():
        node.classes += [] if node.key in reachable else ["fc-unreachable"]
    _rank(runbook, nodes, edges)
    ranks = _chains(nodes, edges)
    _order(ranks)
    _place_x(ranks)
    tops, bottoms = _place_y(ranks)
    for edge in edges:
        if edge.loop and edge.label:
            _place_loop_label(nodes[edge.src], edge.label)
    return nodes, edges, ranks, _Canvas(_ports(nodes.values()), tops, bottoms, f"fc-arrow-{runbook.id}")


def flowchart_svg(runbook: Runbook, lang: str, anchor: Callable[[str], str] = default_anchor,
                  runbook_href: Callable[[str, str], str] = default_runbook_href, *,
                  embed_css: bool = True) -> str:
    """The runbook's decision tree as a standalone inline `<svg>` element (no XML declaration).

    Every step and conclusion is a box linking to `#anchor(id)`, every hand-over to another
    runbook a box linking to `runbook_href(runbook_id, step_id)`, every branch and default an
    arrow. `embed_css` adds `FLOWCHART_CSS` in a `<style>` (zero specificity: the site's rules win).
    """
    nodes, edges, ranks, canvas = _layout(runbook, lang)
    view_w = max(item.x + item.w / 2 for row in ranks for item in row) + MARGIN
    view_h = canvas.bottoms[-1] + MARGIN
    label = UI.get(lang, UI["en"])["aria"].format(title=runbook.title.get(lang), steps=len(runbook.steps),
                                                 ends=len(runbook.conclusions))
    arrowhead = _tag("path", {"class": "fc-arrowhead", "d": "M0,0L10,5L0,10z"})
    marker = _tag("marker", {"id": canvas.marker, "viewBox": "0 0 10 10", "refX": 10, "refY": 5,
                             "markerWidth": 8, "markerHeight": 8, "markerUnits": "userSpaceOnUse",
                             "orient": "auto"}, arrowhead)
    body = "\n".join([
        _tag("title", {}, _text(label)),
        f"<style>{FLOWCHART_CSS}</style>" if embed_css else "",
        _tag("defs", {}, marker),
        _tag("g", {"class": "fc-edges"}, "\n".join(_edge_svg(e, canvas, nodes[e.src]) for e in edges)),
        _tag("g", {"class": "fc-labels"}, "\n".join(filter(None, (_label_svg(e) for e in edges)))),
        _tag("g", {"class": "fc-nodes"},
             "\n".join(_node_svg(n, _href(n, anchor, runbook_href)) for n in nodes.values())),
    ])
    # width 100% scales it down on a phone; max-width keeps it from growing past its own size.
    return _tag("svg", {"xmlns": "http://www.w3.org/2000/svg", "class": "fc",
                        "viewBox": f"0 0 {_num(view_w)} {_num(view_h)}", "width": "100%",
                        "style": f"max-width:{_num(view_w)}px;height:auto", "role": "img",
                        "aria-label": label, "font-family": FONT_FAMILY,
                        "data-width": view_w, "data-height": view_h},
                "\n" + body + "\n")
