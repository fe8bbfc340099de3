"""The decision-tree flowchart: a box per step, conclusion and hand-over, an arrow per branch, no overlaps."""

from __future__ import annotations

import itertools
import re
import time
import xml.etree.ElementTree as ET
from functools import cache
from pathlib import Path

import pytest

from runbook.format.loader import load_file
from runbook.format.model import Branch, Check, Conclusion, Runbook, Step, Text
from runbook.i18n.textwidth import width
from runbook.site.flowchart import flowchart_svg, wrap

ROOT = Path(__file__).resolve().parents[2]
NS = "{http://www.w3.org/2000/svg}"
SVG_TAGS = {"svg", "title", "style", "defs", "marker", "path", "g", "a", "rect", "text", "tspan"}
LIBRARY = sorted(p.stem for p in (ROOT / "runbooks").glob("*.yaml") if not p.name.endswith(".tests.yaml"))


@cache
def library_runbook(rb_id: str) -> Runbook:
    result = load_file(ROOT / "runbooks" / f"{rb_id}.yaml")
    assert result.runbook is not None, result.problems
    return result.runbook


def parse(svg: str) -> ET.Element:
    assert not svg.startswith("<?xml")
    return ET.fromstring(svg)


def classes(element: ET.Element) -> set[str]:
    return set(element.get("class", "").split())


def groups(root: ET.Element, cls: str) -> list[ET.Element]:
    return [g for g in root.iter(f"{NS}g") if cls in classes(g)]


def box(group: ET.Element) -> tuple[float, float, float, float]:
    rect = group.find(f"{NS}rect")
    assert rect is not None
    x, y = float(rect.get("x", "0")), float(rect.get("y", "0"))
    return x, y, x + float(rect.get("width", "0")), y + float(rect.get("height", "0"))


def overlap(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return a[0] < b[2] - 0.5 and b[0] < a[2] - 0.5 and a[1] < b[3] - 0.5 and b[1] < a[3] - 0.5


def externals(rb: Runbook) -> set[str]:
    return {goto for step in rb.steps.values()
            for goto in [*(b.goto for b in step.branches), step.default] if goto and ":" in goto}


def expected_edges(rb: Runbook) -> set[tuple[str, str, str, str]]:
    edges = {(s.id, "branch", str(i), b.goto) for s in rb.steps.values() for i, b in enumerate(s.branches)}
    return edges | {(s.id, "default", "-1", s.default) for s in rb.steps.values() if s.default}


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("rb_id", LIBRARY)
def test_every_library_runbook_draws_completely(rb_id: str, lang: str) -> None:
    rb = library_runbook(rb_id)
    root = parse(flowchart_svg(rb, lang))
    assert root.get("role") == "img" and root.get("aria-label") and root.find(f"{NS}title") is not None
    assert root.get("width") == "100%" and root.get("viewBox", "").startswith("0 0 ")

    nodes = groups(root, "fc-node")
    ids = [g.get("data-id") for g in nodes]
    assert sorted(ids) == sorted([*rb.steps, *rb.conclusions, *externals(rb)])  # exactly one each

    for link in root.iter(f"{NS}a"):
        href = link.get("href", "")
        if href.startswith("#"):
            assert href[1:] in rb.steps or href[1:] in rb.conclusions
        else:
            match = re.fullmatch(r"\.\./([a-z0-9-]+)/(?:#([a-z0-9-]+))?", href)
            assert match, href
            other = library_runbook(match.group(1))  # no anchor: `other:start`, the top of its page
            assert match.group(2) is None or other.node(match.group(2)) is not None, href

    drawn = {(g.get("data-from"), g.get("data-kind"), g.get("data-index"), g.get("data-to"))
             for g in groups(root, "fc-edge")}
    assert drawn == expected_edges(rb)
    assert all(g.find(f"{NS}path") is not None for g in groups(root, "fc-edge"))
    defaults = [g for g in groups(root, "fc-edge") if g.get("data-kind") == "default"]
    assert all("fc-edge-default" in classes(g) for g in defaults)

    boxes = [box(g) for g in nodes] + [box(g) for g in groups(root, "fc-label")]
    for a, b in itertools.combinations(boxes, 2):
        assert not overlap(a, b), (a, b)


def test_the_widest_layer_of_ray_hang_fits_in_the_view_box() -> None:
    root = parse(flowchart_svg(library_runbook("ray-hang"), "en"))
    _, _, view_w, view_h = map(float, root.get("viewBox", "").split())
    rows: dict[float, list[tuple[float, float, float, float]]] = {}
    for group in groups(root, "fc-node"):
        x0, y0, x1, y1 = box(group)
        rows.setdefault(round((y0 + y1) / 2), []).append((x0, y0, x1, y1))
    widest = max(rows.values(), key=lambda row: max(b[2] for b in row) - min(b[0] for b in row))
    assert len(widest) >= 2
    assert min(b[0] for b in widest) >= 0 and max(b[2] for b in widest) <= view_w
    assert all(b[1] >= 0 and b[3] <= view_h for row in rows.values() for b in row)


def text(en: str, zh: str | None = None) -> Text:
    return Text(en=en, zh=zh or en)


def make_runbook(steps: dict[str, tuple[str, list[tuple[str, str | None]], str | None]],
                 conclusions: dict[str, str], start: str, title: str = "Test") -> Runbook:
    """A runbook from {step: (title, [(goto, note)], default)} and {conclusion: title}."""
    return Runbook(
        id="test-tree", version="1.0.0", title=text(title), summary=text("s"), tags=[], symptoms=[],
        signatures=[], params={}, start=start, changelog=[], path="<test>", digest="",
        steps={sid: Step(sid, text(t), Check("process", {}, None),
                         [Branch("true", goto, text(note) if note else None) for goto, note in branches],
                         default)
               for sid, (t, branches, default) in steps.items()},
        conclusions={cid: Conclusion(cid, "critical", [], text(t), text("e"), [])
                     for cid, t in conclusions.items()},
    )


def test_runbook_text_comes_out_inert() -> None:
    rb = make_runbook(
        {"first": ('<script>alert(1)</script> "quoted" & co', [("end", 'say "hi" <b>now</b>')],
                   "other:start")},
        {"end": "</text><script>alert(2)</script>\x0b\x00"}, "first", title='"><script>alert(3)</script>')
    svg = flowchart_svg(rb, "en", anchor=lambda i: f'{i}" onmouseover="alert(4)',
                        runbook_href=lambda r, s: f'javascript:x"{r}')
    root = parse(svg)
    assert "<script" not in svg
    assert {el.tag.removeprefix(NS) for el in root.iter()} <= SVG_TAGS
    assert not any(k.startswith("on") for el in root.iter() for k in el.attrib)
    node = next(g for g in groups(root, "fc-node") if g.get("data-id") == "first")
    assert node.findtext(f"{NS}title") == '<script>alert(1)</script> "quoted" & co'
    hrefs = {a.get("href") for a in root.iter(f"{NS}a")}
    assert '#first" onmouseover="alert(4)' in hrefs and 'javascript:x"other' in hrefs
    assert root.get("aria-label", "").endswith('"><script>alert(3)</script>: 1 steps, 1 conclusions')
    for tag in re.findall(r"<[a-z][^>]*>", svg):  # every quote inside a tag delimits an attribute
        assert re.fullmatch(r'<[a-zA-Z]+(\s+[a-zA-Z:-]+="[^"<]*")*\s*/?>', tag), tag


def test_loops_unreachable_nodes_and_hand_overs_are_drawn() -> None:
    rb = make_runbook(
        {"a": ("A", [("b", "go on"), ("a", "retry")], "done"),
         "b": ("B", [("a", "back to the start"), ("c", None)], "x-book:start"),
         "c": ("C", [("b", "loop in the middle")], "done"),
         "orphan": ("Nobody comes here", [], "lonely")},
        {"done": "Done", "lonely": "Lonely", "unused": "Never reached"}, "a")
    root = parse(flowchart_svg(rb, "en"))
    assert {g.get("data-id") for g in groups(root, "fc-node")} == {
        "a", "b", "c", "orphan", "done", "lonely", "unused", "x-book:start"}
    unreachable = {g.get("data-id") for g in groups(root, "fc-node") if "fc-unreachable" in classes(g)}
    assert unreachable == {"orphan", "lonely", "unused"}
    edges = groups(root, "fc-edge")
    assert len(edges) == len(expected_edges(rb))
    assert any("fc-edge-back" in classes(g) for g in edges)
    assert any("fc-edge-loop" in classes(g) for g in edges)
    boxes = [box(g) for g in groups(root, "fc-node")] + [box(g) for g in groups(root, "fc-label")]
    assert not any(overlap(a, b) for a, b in itertools.combinations(boxes, 2))


def test_a_wide_fan_out_grows_down_not_sideways() -> None:
    ends = {f"end-{i}": f"Conclusion number {i}" for i in range(30)}
    rb = make_runbook({"s": ("Fan out", [(c, f"note {c}") for c in ends], None)}, ends, "s")
    root = parse(flowchart_svg(rb, "en"))
    _, _, view_w, view_h = map(float, root.get("viewBox", "").split())
    assert view_w < 1400 and view_h > view_w


def test_output_is_deterministic() -> None:
    rb = library_runbook("rlhf-hang")
    assert flowchart_svg(rb, "zh") == flowchart_svg(rb, "zh")


def test_titles_wrap_by_display_width() -> None:
    lines = wrap("检查 GPU 驱动是否仍然响应以及哪些进程占用了显存和计算资源", 22, 3)
    assert len(lines) <= 3 and all(width(line) <= 22 for line in lines)
    assert wrap("x" * 100, 22, 3)[-1].endswith("…")
    assert wrap("Is a training process running?", 22, 3) == ["Is a training", "process running?"]


def test_the_whole_library_renders_fast() -> None:
    runbooks = [library_runbook(rb_id) for rb_id in LIBRARY]
    started = time.perf_counter()
    for rb in runbooks:
        for lang in ("en", "zh"):
            flowchart_svg(rb, lang)
    assert time.perf_counter() - started < 2.0  # ~0.2 s on a developer machine; slack for a busy CI
