"""The loader on mutated copies of every shipped runbook: a runbook or problems with positions.

Byte flips, deleted, duplicated and swapped lines, truncation, indentation changes and random
YAML values in random places must never raise: a broken file is a list of `file:line:col`
problems for its author, never a traceback.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from runbook.format.loader import LoadResult, load_file, load_text

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = {p.name: p.read_text("utf-8") for p in sorted((ROOT / "runbooks").glob("*.yaml"))
           if not p.name.endswith(".tests.yaml")}
FILE = "fuzzed.yaml"

# YAML that parsers and loaders trip on: tags, anchors, merge keys, odd scalars, deep nesting.
_NASTY = [
    "~", "null", "[]", "{}", "''", '""', "[a, {b: c}]", "&a [1, 2]", "*a", "<<: *a", "&x a\n*x",
    "!!python/object/apply:os.system ['true']", "!!python/name:os.system", "!!binary aGVsbG8=",
    "!!set {a, b}", "!!omap [a: 1]", "!!timestamp 2001-12-14", "!custom tag", "? [complex]\n: key",
    "|\n  block text", ">-\n  folded", "'unterminated", '"\\x00\\ud800"', "1e999", "-1e999", "0x1F",
    "0o17", ".inf", "-.nan", "2001-12-14t21:59:43.10-05:00", "yes", "on", "NO", "9" * 400,
    "%YAML 1.1", "%TAG ! tag:x,2000:", "---", "...", "\t", "{{ result.__class__ }}",
    "{% for x in y %}", "${HOME}", "\ufeff", "- - - -", "[" * 300, "{a: " * 100, "- " * 200,
    "a: b: c", "@reserved", "`reserved", "key: [unclosed", "\x00", "\x1b[31m", "\u2028", "é中文",
]


def _yaml_values() -> st.SearchStrategy[str]:
    plain = st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
        max_leaves=12)
    flow = plain.map(lambda v: yaml.safe_dump(v, default_flow_style=True, width=10_000).strip())
    return st.sampled_from(_NASTY) | flow | st.text(max_size=40)


def _lines(text: str) -> list[str]:
    return text.split("\n")


def _flip(text: str, data: st.DataObject) -> str:
    if not text:
        return text
    at = data.draw(st.integers(0, len(text) - 1))
    return text[:at] + data.draw(st.characters()) + text[at + 1:]


def _line_edit(text: str, data: st.DataObject) -> str:
    lines = _lines(text)
    i, j = (data.draw(st.integers(0, len(lines) - 1)) for _ in range(2))
    kind = data.draw(st.sampled_from(["delete", "duplicate", "swap"]))
    if kind == "delete":
        del lines[i]
    elif kind == "duplicate":
        lines.insert(j, lines[i])
    else:
        lines[i], lines[j] = lines[j], lines[i]
    return "\n".join(lines)


def _truncate(text: str, data: st.DataObject) -> str:
    return text[: data.draw(st.integers(0, len(text)))]


def _reindent(text: str, data: st.DataObject) -> str:
    lines = _lines(text)
    i = data.draw(st.integers(0, len(lines) - 1))
    shift = data.draw(st.integers(-8, 8))
    line = lines[i]
    if shift < 0:
        line = line[min(-shift, len(line) - len(line.lstrip(" "))):]
    else:
        line = data.draw(st.sampled_from([" ", "\t"])) * shift + line
    lines[i] = line
    return "\n".join(lines)


def _insert_value(text: str, data: st.DataObject) -> str:
    lines = _lines(text)
    i = data.draw(st.integers(0, len(lines) - 1))
    value = data.draw(_yaml_values())
    where = data.draw(st.sampled_from(["value", "new key", "anywhere"]))
    if where == "value" and ": " in lines[i]:
        lines[i] = lines[i].split(": ", 1)[0] + ": " + value
    elif where == "new key":
        indent = " " * data.draw(st.integers(0, 12))
        key = data.draw(st.sampled_from(["id", "steps", "when", "x", "check"]))
        lines.insert(i, f"{indent}{key}: {value}")
    else:
        at = data.draw(st.integers(0, len(text)))
        return text[:at] + value + text[at:]
    return "\n".join(lines)


_MUTATIONS = [_flip, _line_edit, _truncate, _reindent, _insert_value]


def _mutate(data: st.DataObject) -> str:
    text = SHIPPED[data.draw(st.sampled_from(sorted(SHIPPED)), label="runbook")]
    mutations = data.draw(st.lists(st.sampled_from(_MUTATIONS), min_size=1, max_size=4), label="mutations")
    for mutation in mutations:
        text = mutation(text, data)
    return text


# Where YAML ends a line (and so numbers lines): not only at "\n".
_YAML_LINE_BREAK = re.compile("\r\n|[\r\n\x85\u2028\u2029]")


def _load(text: str, file: str) -> LoadResult:
    return load_text(text, file)


def _assert_positioned(result: LoadResult, text: str, file: str) -> None:
    """A runbook, or at least one error; every problem points into the file, in one line."""
    assert isinstance(result, LoadResult)
    if result.runbook is None:
        assert any(p.severity == "error" for p in result.problems), "no runbook and no error"
    last_line = len(_YAML_LINE_BREAK.split(text))
    for problem in result.problems:
        assert problem.file == file, problem
        assert 1 <= problem.line <= last_line + 1, f"line outside the file ({last_line} lines): {problem}"
        assert problem.column >= 1, problem
        assert problem.message.strip(), problem
        assert "\n" not in str(problem), f"a problem is one line: {str(problem)!r}"


def test_every_shipped_runbook_loads_unmutated() -> None:
    """The baseline the mutations start from: every shipped runbook is valid."""
    assert SHIPPED
    for name, text in SHIPPED.items():
        result = load_text(text, name)
        assert result.ok, [str(p) for p in result.problems]


@settings(max_examples=settings.default.max_examples * 4)
@given(data=st.data())
def test_mutated_runbooks_give_a_runbook_or_positioned_problems(data: st.DataObject, time_limit: Any) -> None:
    text = _mutate(data)
    with time_limit(20, "loading a mutated runbook"):
        result = _load(text, FILE)
    _assert_positioned(result, text, FILE)


@settings(max_examples=settings.default.max_examples * 2)
@given(data=st.data())
def test_random_yaml_documents_give_positioned_problems(data: st.DataObject, time_limit: Any) -> None:
    """Not a runbook at all: any YAML value, or a mapping of runbook keys to any values."""
    keys = st.sampled_from(["apiVersion", "id", "version", "title", "steps", "start", "conclusions",
                            "params", "signatures", "requires", "taxonomy", "x"])
    doc = data.draw(st.one_of(_yaml_values(),
                              st.dictionaries(keys, _yaml_values(), max_size=8).map(
                                  lambda d: "\n".join(f"{k}: {v}" for k, v in d.items()))))
    with time_limit(20, "loading random YAML"):
        result = _load(doc, FILE)
    _assert_positioned(result, doc, FILE)


@settings(max_examples=settings.default.max_examples * 2)
@given(data=st.data())
def test_mutated_bytes_through_load_file(data: st.DataObject, tmp_path: Path, time_limit: Any) -> None:
    """Bytes, not text: invalid UTF-8, NULs and byte-order marks reach `load_file`."""
    raw = bytearray(SHIPPED[data.draw(st.sampled_from(sorted(SHIPPED)))].encode("utf-8"))
    for _ in range(data.draw(st.integers(1, 8))):
        at = data.draw(st.integers(0, len(raw)))
        nasty = st.sampled_from([b"\xff", b"\xc3", b"\x00", b"\xef\xbb\xbf", b"\xed\xa0\x80"])
        raw[at:at + data.draw(st.integers(0, 3))] = data.draw(nasty | st.binary(max_size=4))
    path = tmp_path / FILE
    path.write_bytes(bytes(raw))
    with time_limit(20, "loading mutated bytes"):
        result = load_file(path)
    text = bytes(raw).decode("utf-8", errors="replace")
    _assert_positioned(result, text, str(path))


def test_problems_of_a_nasty_value_in_every_field_are_positioned() -> None:
    """Each nasty value as the value of two top-level keys of one shipped runbook, every key in turn."""
    text = SHIPPED[sorted(SHIPPED)[0]]
    keys = [line.split(":", 1)[0] for line in text.split("\n") if line and line[0].isalpha() and ":" in line]
    for i, value in enumerate(_NASTY):
        for key in (keys[i % len(keys)], keys[(7 * i + 3) % len(keys)]):
            mutated = "\n".join(f"{key}: {value}" if line.startswith(f"{key}:") else line
                                for line in text.split("\n"))
            _assert_positioned(_load(mutated, FILE), mutated, FILE)


def test_the_json_module_is_not_what_parses_runbooks() -> None:
    """A JSON document is YAML too: it loads to positioned problems, not a crash."""
    doc = json.dumps({"apiVersion": "runbook/v1", "id": 3, "steps": [None, {"__class__": 1}]})
    _assert_positioned(load_text(doc, FILE), doc, FILE)


def _edited(pattern: str, new: str) -> str:
    """training-hang.yaml with the first match of `pattern` replaced."""
    text, count = re.subn(pattern, new, SHIPPED["training-hang.yaml"], count=1)
    assert count == 1, pattern
    return text


@pytest.mark.parametrize("text", [
    _edited(r"timeout: \d+s", "timeout: " + "9" * 400),
    _edited(r"taxonomy: \[", "taxonomy: [{b: c}, "),
    _edited(r"type: log\b", "type: []"),
    "apiVersion: runbook/v1\nid: !!int abc\n", "apiVersion: runbook/v1\nid: !!float x\n",
    "apiVersion: runbook/v1\nid: !!bool maybe\n", "apiVersion: runbook/v1\nid: !!timestamp x\n",
    "apiVersion: runbook/v1\nid: \ud800\n",
], ids=["huge-timeout", "taxonomy-mapping", "check-type-list", "int-tag", "float-tag", "bool-tag",
        "timestamp-tag", "lone-surrogate"])
def test_crashes_the_fuzzing_found_are_positioned_problems(text: str) -> None:
    """Each was a traceback once (float() of a 400-digit int, a dict as a taxonomy id, a list as
    a check type, PyYAML's constructors on bad tagged values, a lone surrogate)."""
    _assert_positioned(load_text(text, FILE), text, FILE)
