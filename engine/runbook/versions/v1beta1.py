"""runbook/v1beta1 -> runbook/v1, on a ruamel.yaml round-trip document (see docs/api-versions.md).

The draft format wrote bilingual texts as sibling keys (`title` + `title_zh`,
symptoms and changelog entries as `{text, text_zh}`), check parameters as
`params:`, branches as `{if, then}` and one `category:` per conclusion. Keys are
renamed in place so that their position and comments stay where they were.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

ZH_SUFFIX = "_zh"


def upgrade(doc: Any) -> None:
    """Rewrite one v1beta1 document (a ruamel CommentedMap) into v1, in place."""
    merge_texts(doc, "title", "summary")
    for item in _items(doc.get("symptoms")):
        _rename_pair(item, ("text", "en"), ("text_zh", "zh"))
    for entry in _items(doc.get("changelog")):
        _rename_pair(entry, ("text", "en"), ("text_zh", "zh"))
    for param in _values(doc.get("params")):
        merge_texts(param, "help")
    for step in _values(doc.get("steps")):
        _upgrade_step(step)
    for conclusion in _values(doc.get("conclusions")):
        _upgrade_conclusion(conclusion)


def _upgrade_step(step: Any) -> None:
    merge_texts(step, "title", "description")
    _upgrade_check(step.get("check"))
    for branch in _items(step.get("branches")):
        rename(branch, "if", "when")
        rename(branch, "then", "goto")
        merge_texts(branch, "note")


def _upgrade_conclusion(conclusion: Any) -> None:
    merge_texts(conclusion, "title", "explanation")
    _category_to_taxonomy(conclusion)
    for fix in _items(conclusion.get("fixes")):
        merge_texts(fix, "title", "body")
        verify = fix.get("verify")
        if _is_map(verify):
            _upgrade_check(verify.get("check"))


def _upgrade_check(check: Any) -> None:
    if _is_map(check):
        rename(check, "params", "with")


def _category_to_taxonomy(conclusion: Any) -> None:
    """`category: id` -> `taxonomy: [id]`; none -> `taxonomy: []` (v1 requires the list)."""
    from ruamel.yaml.comments import CommentedSeq

    if "taxonomy" in conclusion:
        return
    ids = CommentedSeq()
    ids.fa.set_flow_style()
    if "category" in conclusion:
        category = conclusion["category"]
        ids.extend(category if isinstance(category, list) else [category])
        conclusion["category"] = ids
        rename(conclusion, "category", "taxonomy")
    else:
        after = list(conclusion).index("severity") + 1 if "severity" in conclusion else 0
        conclusion.insert(after, "taxonomy", ids)


def merge_texts(mapping: Any, *keys: str) -> None:
    """`key: English` + `key_zh: 中文` -> `key: {en: English, zh: 中文}`, for each key.

    One-liners become a flow mapping on one line; block scalars keep their style
    under `en:` / `zh:`. A side that is missing stays missing, for the loader to report.
    """
    from ruamel.yaml.comments import CommentedMap

    if not _is_map(mapping):
        return
    for key in keys:
        zh_key = key + ZH_SUFFIX
        if _is_map(mapping.get(key)) or (key not in mapping and zh_key not in mapping):
            continue  # already {en, zh}, or no such text
        text = CommentedMap()
        for side, source in (("en", key), ("zh", zh_key)):
            if source in mapping:
                text[side] = mapping[source]
        if all(_one_line(v) for v in text.values()):
            text.fa.set_flow_style()
        zh_comment = mapping.ca.items.pop(zh_key, None)
        if key not in mapping:
            mapping.insert(list(mapping).index(zh_key), key, text)
        else:
            mapping[key] = text
        if zh_key in mapping:
            del mapping[zh_key]
        _keep_comment(mapping, key, text, zh_comment)


def _keep_comment(mapping: Any, key: str, text: Any, zh_comment: Any) -> None:
    """The comment that followed `key_zh:` now follows the text that replaced it."""
    if zh_comment is None:
        return
    if not text.fa.flow_style():
        text.ca.items["zh" if "zh" in text else "en"] = zh_comment
        return
    own = mapping.ca.items.get(key)
    if own is None or own[2] is None:
        mapping.ca.items[key] = zh_comment
        return
    # Both lines had a comment; the flow mapping is one line: keep both, in order.
    extra = zh_comment[2].value if zh_comment[2] is not None else ""
    if extra.startswith("#") and own[2].value.count("\n") == 1:
        own[2].value = own[2].value.rstrip("\n") + "  " + extra
    else:
        own[2].value += extra[1:] if extra.startswith("\n") else extra


def rename(mapping: Any, old: str, new: str) -> None:
    """Rename a key where it stands, with its comments. Leaves both when `new` exists too
    (the loader then reports the stray key)."""
    if not _is_map(mapping) or old not in mapping or new in mapping:
        return
    position = list(mapping).index(old)
    value, comment = mapping[old], mapping.ca.items.pop(old, None)
    del mapping[old]
    mapping.insert(position, new, value)
    if comment is not None:
        mapping.ca.items[new] = comment


def _rename_pair(mapping: Any, *pairs: tuple[str, str]) -> None:
    for old, new in pairs:
        rename(mapping, old, new)


def _one_line(value: Any) -> bool:
    from ruamel.yaml.scalarstring import FoldedScalarString, LiteralScalarString

    if isinstance(value, (LiteralScalarString, FoldedScalarString)):
        return False
    return not isinstance(value, str) or "\n" not in value


def _is_map(value: Any) -> bool:
    return isinstance(value, dict)


def _values(mapping: Any) -> Iterator[Any]:
    return iter(mapping.values()) if _is_map(mapping) else iter(())


def _items(sequence: Any) -> Iterator[Any]:
    return iter(sequence) if isinstance(sequence, list) else iter(())
