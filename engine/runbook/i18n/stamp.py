"""Writing translation fingerprints (`fp`) into runbooks and articles, changing nothing else.

Runbooks are rewritten through ruamel.yaml's round trip (comments, key order,
flow mappings, block scalars and quoting kept; no line is rewrapped); articles
get one `fp:` line in both front matters. A pair where only one side changed
since its fingerprint is left alone unless the caller accepts it as in step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runbook.format import roundtrip, safeyaml
from runbook.format.problems import DocPath, Problem, format_path
from runbook.i18n.translations import (
    BOTH_CHANGED,
    CURRENT,
    EN_CHANGED,
    UNSTAMPED,
    article_text,
    fingerprint,
    kb_stale_message,
    stale_message,
    state,
    texts,
)
from runbook.library.kb import split_front_matter

_FP_LINE = re.compile(r"^fp:[ \t]*[\"']?([^\"'\s#]*)[\"']?[ \t]*(?:#.*)?$", re.MULTILINE)


class StampError(Exception):
    """A file that cannot be stamped, as one line: `file:line:col: what is wrong`."""


@dataclass
class StampResult:
    file: str
    written: int = 0  # fingerprints added or refreshed
    accepted: int = 0  # one-sided changes stamped because the caller said they are in step
    stale: list[Problem] = field(default_factory=list)  # one-sided changes left alone
    relaid: int = 0  # lines the YAML writer could not keep as they were (other than fp)


def stamp_runbook(path: Path, accept: bool = False) -> StampResult:
    """Add or refresh the `fp` of every text in a runbook file, and write it back if anything changed."""
    text = _read(path)
    data, yaml, relaid = _load(path, text)
    result = StampResult(str(path), relaid=relaid)
    for ref in texts(data):
        how = state(ref.en, ref.zh, ref.fp)
        if how == CURRENT:
            continue
        if how not in (UNSTAMPED, BOTH_CHANGED) and not accept:
            name, message = stale_message(format_path(ref.path), how, str(path))
            where: DocPath = (*ref.path, name)
            result.stale.append(Problem(str(path), *_position(text, where), where, message, "warning"))
            continue
        _set_fp(data, ref.path, fingerprint(ref.en, ref.zh))
        result.written += how in (UNSTAMPED, BOTH_CHANGED)
        result.accepted += how not in (UNSTAMPED, BOTH_CHANGED)
    if result.written or result.accepted:
        path.write_text(roundtrip.dump(yaml, data), "utf-8")
    return result


def _position(text: str, where: DocPath) -> tuple[int, int]:
    """Line and column of a doc path, as lint reports it (parsed only when a pair is stale)."""
    import yaml

    from runbook.format.yamlpos import DuplicateKeyError, parse

    try:
        return parse(text)[1].of(where)
    except (yaml.YAMLError, DuplicateKeyError):
        return (1, 1)


def _read(path: Path) -> str:
    try:
        return safeyaml.read_text(path)[0]
    except OSError as exc:
        raise StampError(f"{path}:1:1: cannot read: {exc.strerror or exc}") from None
    except safeyaml.LimitError as exc:
        raise StampError(f"{path}:{exc.line}:{exc.column}: {exc.message}") from None


def _load(path: Path, text: str) -> tuple[Any, Any, int]:
    """The loaded document, a round-trip writer set to the file's own layout, and how many
    lines that writer still cannot keep as they are (0 for files in one consistent style)."""
    try:
        return roundtrip.load(text)
    except roundtrip.RoundTripError as exc:
        raise StampError(f"{path}:{exc.line}:{exc.column}: {exc.message} (fix it first; "
                         "runbook lint shows every problem)") from None


def _node(data: Any, path: DocPath) -> Any:
    for part in path:
        data = data[part]
    return data


def _set_fp(data: Any, path: DocPath, value: str) -> None:
    """Set `fp` on the text at `path`; a new key goes last, and comments around it stay in place."""
    text = _node(data, path)
    if "fp" in text:
        text["fp"] = value
        return
    last = list(text)[-1]
    text["fp"] = value
    if text.fa.flow_style():
        if path:
            _shift_end_of_line_comment(_node(data, path[:-1]), path[-1], len(f", fp: {value}"))
    else:
        _move_trailing_comment(text, last, "fp")


def _shift_end_of_line_comment(parent: Any, key: str | int, by: int) -> None:
    """Keep the gap before a comment after a flow mapping that just grew by `by` characters."""
    item = parent.ca.items.get(key) if hasattr(parent, "ca") else None
    slot = 0 if isinstance(key, int) else 2  # sequences keep it first, mappings third
    token = item[slot] if item and len(item) > slot else None
    if token is not None and hasattr(token, "column"):
        token.column += by


def _move_trailing_comment(mapping: Any, from_key: str, to_key: str) -> None:
    """Comment lines after the last key belong to what follows the mapping: keep them after `fp`."""
    from ruamel.yaml.error import CommentMark
    from ruamel.yaml.tokens import CommentToken

    item = mapping.ca.items.get(from_key)
    token = item[2] if item and len(item) > 2 else None
    if token is None:
        return
    end_of_line, _, rest = token.value.partition("\n")
    if not rest.strip():
        return
    token.value = end_of_line + "\n"
    mapping.ca.items[to_key] = [None, None, CommentToken("\n" + rest, CommentMark(0), None), None]


# ---- knowledge-base articles ----


def stamp_article(folder: Path, accept: bool = False) -> StampResult:
    """Write the fingerprint of an article's two versions (title, summary, body) into both
    front matters."""
    en_path, zh_path = folder / "en.md", folder / "zh.md"
    result = StampResult(str(folder))
    if not (en_path.exists() and zh_path.exists()):
        return result  # one language only: lint reports the missing one
    en, zh = _split(en_path), _split(zh_path)
    old = {_recorded(en[0]), _recorded(zh[0])}
    en_text, zh_text = article_text(*en), article_text(*zh)
    how = state(en_text, zh_text, old.pop() if len(old) == 1 else None)
    if how == CURRENT:
        return result
    if how not in (UNSTAMPED, BOTH_CHANGED) and not accept:
        behind, (front, _) = (zh_path, zh) if how == EN_CHANGED else (en_path, en)
        message = kb_stale_message(str(en_path), str(zh_path), how, str(folder))
        result.stale.append(Problem(str(behind), front.count("\n") + 1, 1, ("body",), message,
                                    "warning"))
        return result
    value = fingerprint(en_text, zh_text)
    for path, (front, body) in ((en_path, en), (zh_path, zh)):
        path.write_text(_with_fp(front, value) + body, "utf-8")
    result.written += how in (UNSTAMPED, BOTH_CHANGED)
    result.accepted += how not in (UNSTAMPED, BOTH_CHANGED)
    return result


def _split(path: Path) -> tuple[str, str]:
    parts = split_front_matter(_read(path))
    if parts is None:
        raise StampError(f"{path}:1:1: no front matter (the file must start with a `---` block)")
    return parts


def _recorded(front: str) -> str | None:
    found = _FP_LINE.search(front)
    return found.group(1) if found else None


def _with_fp(front: str, value: str) -> str:
    if _FP_LINE.search(front):
        return _FP_LINE.sub(f"fp: {value}", front, count=1)
    closing = front.rstrip("\n").rfind("\n")  # the closing `---` line
    return front[:closing + 1] + f"fp: {value}\n" + front[closing + 1:]
