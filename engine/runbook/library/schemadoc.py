"""The runbook format reference, generated from the shipped JSON Schema and the check registry.

The schema is walked (resolving `$ref`) into one row per field, under the dotted path a
runbook author writes: `steps.<step-id>.check.timeout`, `conclusions.<conclusion-id>.fixes[].effect`.
Definitions the schema uses in more than one place (text, id, target, duration, fingerprint)
are documented once, as types, and fields of that type link to them. The example runbook
is assembled from the schema's `examples`, so the reference and the example cannot drift.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

from runbook.checks import CHECK_TYPES
from runbook.format.model import Text

SCHEMA_FILE = "schema/runbook.v1.json"
_MISSING = object()  # no example for this node


@dataclass(frozen=True)
class FieldDoc:
    path: str  # as an author writes it: "steps.<step-id>.check.timeout"
    anchor: str  # the HTML id: the path without placeholders, "steps.check.timeout"
    type: str  # "string", "map", "text[]", or a shared type's name ("duration")
    type_anchor: str  # the shared type's anchor ("types.duration"), or ""
    required: bool
    allowed: tuple[str, ...]  # enum / const values, or the check types for `check.type`
    pattern: str  # the regular expression a value (or, for a map entry, its name) must match
    default: str  # as YAML, "" when the schema gives none
    description: Text
    example: str  # as YAML, the way an author writes it (`timeout: 5s`); "" when none

    @property
    def lists_check_types(self) -> bool:
        return _is_check_type(self.path)


@dataclass(frozen=True)
class CheckTypeDoc:
    name: str
    summary: Text


@dataclass(frozen=True)
class LimitDoc:
    what: Text
    limit: str


@dataclass(frozen=True)
class Reference:
    fields: tuple[FieldDoc, ...]
    types: tuple[FieldDoc, ...]
    check_types: tuple[CheckTypeDoc, ...]
    example: str  # a complete runbook (YAML) assembled from the examples
    limits: tuple[LimitDoc, ...] = ()


def raw_schema() -> dict[str, Any]:
    """The schema file as shipped (the loader adds the check types' enum on top of it)."""
    result: dict[str, Any] = json.loads(resources.files("runbook").joinpath(SCHEMA_FILE).read_text("utf-8"))
    return result


@lru_cache(maxsize=1)
def reference() -> Reference:
    from runbook.library.checkdocs import describe_all

    schema = raw_schema()
    walker = _Walker(schema)
    checks = tuple(CheckTypeDoc(doc.name, Text(doc.summary["en"], doc.summary["zh"]))
                   for doc in describe_all())
    return Reference(tuple(walker.fields()), tuple(walker.types()), checks, example_yaml(schema),
                     limits())


def limits() -> tuple[LimitDoc, ...]:
    """The bounds the loader enforces, read from the constants it enforces them with."""
    from runbook.format import loader, safeyaml

    rows = [
        (Text("File size: a runbook, its test file, an inventory", "文件大小：runbook、其测试文件、清单"),
         _bytes(safeyaml.RUNBOOK_MAX_BYTES)),
        (Text("File size: one language of a knowledge-base article", "文件大小：知识库文章的一种语言"),
         _bytes(safeyaml.ARTICLE_MAX_BYTES)),
        (Text("File size: a recorded incident (`--record`)", "文件大小：录制的事故（`--record`）"),
         _bytes(safeyaml.RECORDING_MAX_BYTES)),
        (Text("Nesting depth of one document", "单个文档的嵌套深度"), str(safeyaml.MAX_DEPTH)),
        (Text("Values in one document, aliases expanded", "单个文档中的值（别名展开后）"),
         f"{safeyaml.MAX_NODES:,}"),
    ]
    names = {"steps": "步骤", "conclusions": "结论", "signatures": "日志特征", "parameters": "参数"}
    for limit, what in loader.SIZE_LIMITS.values():
        text = Text(f"{what.capitalize()} in one runbook", f"每个 runbook 的{names[what]}数")
        rows.append((text, str(limit)))
    rows.append((Text("Branches of one step", "每个步骤的分支数"), str(loader.MAX_BRANCHES)))
    rows.append((Text("Fixes of one conclusion", "每个结论的修复数"), str(loader.MAX_FIXES)))
    return tuple(LimitDoc(what, limit) for what, limit in rows)


def _bytes(count: int) -> str:
    return f"{count:,} bytes ({count >> 20} MiB)"


def anchor_of(path: str) -> str:
    """`steps.<step-id>.check.timeout` -> `steps.check.timeout`; a trailing placeholder
    keeps its name (`steps.<step-id>` -> `steps.step-id`) so it differs from `steps`."""
    parts = path.replace("[]", "").split(".")
    kept = [p for p in parts[:-1] if not p.startswith("<")]
    return ".".join([*kept, parts[-1].strip("<>")])


INLINE_MAX = 90  # characters: a short collection of scalars goes on one line, as in the runbooks


class _Dumper(yaml.SafeDumper):
    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)  # indent list items under their key, as runbooks do


def _inline(values: list[Any]) -> bool:
    scalars = not any(isinstance(v, (dict, list)) for v in values)
    return scalars and sum(len(str(v)) + 4 for v in values) <= INLINE_MAX


def _mapping(dumper: yaml.SafeDumper, data: dict[Any, Any]) -> yaml.Node:
    flow = _inline([*data, *data.values()])
    return dumper.represent_mapping("tag:yaml.org,2002:map", data, flow_style=flow)


def _sequence(dumper: yaml.SafeDumper, data: list[Any]) -> yaml.Node:
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=_inline(data))


_Dumper.add_representer(dict, _mapping)
_Dumper.add_representer(list, _sequence)


def dump_yaml(value: Any) -> str:
    """YAML as runbooks are written: short collections of scalars on one line, texts one per line."""
    text: str = yaml.dump(value, Dumper=_Dumper, allow_unicode=True, sort_keys=False, width=10_000)
    return text.removesuffix("...\n").rstrip("\n")


def field_yaml(key: str, value: Any) -> str:
    """`key: value` as an author writes it in place (`timeout: 5s`, not `{timeout: 5s}`)."""
    text = dump_yaml(value)
    if "\n" not in text and not text.startswith("- "):
        return f"{key}: {text}"
    return f"{key}:\n" + "\n".join(f"  {line}" for line in text.splitlines())


def example_yaml(schema: dict[str, Any]) -> str:
    return dump_yaml(_Walker(schema).example(schema)) + "\n"


class _Walker:
    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema
        # A definition used in several places is a type, documented once; one used once
        # (step, conclusion) is a structure, shown in place under its path.
        counts = Counter(ref.rsplit("/", 1)[-1] for ref in _refs(schema))
        self.shared = [name for name in schema.get("$defs", {}) if counts[name] > 1]

    def resolve(self, node: dict[str, Any]) -> tuple[dict[str, Any], str]:
        """The node with its `$ref` merged in (the node's own keywords win), and the def's name."""
        ref = node.get("$ref")
        if not isinstance(ref, str):
            return node, ""
        name = ref.rsplit("/", 1)[-1]
        target, _ = self.resolve(self.schema["$defs"][name])
        return {**target, **{k: v for k, v in node.items() if k != "$ref"}}, name

    # -- fields --

    def fields(self) -> Iterator[FieldDoc]:
        yield from self._object(self.schema, "")

    def types(self) -> Iterator[FieldDoc]:
        for name in self.shared:
            node = self.schema["$defs"][name]
            yield self._row(name, node, "", required=False, anchor=f"types.{name}", key="")
            yield from self._children(name, node, anchor_prefix=f"types.{name}.")

    def _object(self, node: dict[str, Any], prefix: str, anchor_prefix: str = "") -> Iterator[FieldDoc]:
        required = set(node.get("required", []))
        for key, child in node.get("properties", {}).items():
            path = f"{prefix}{key}"
            merged, ref = self.resolve(child)
            anchor = anchor_prefix + key if anchor_prefix else anchor_of(path)
            yield self._row(path, merged, ref, key in required, anchor, key)
            if ref not in self.shared:
                yield from self._children(path, merged, anchor_prefix and f"{anchor}.")

    def _children(self, path: str, merged: dict[str, Any], anchor_prefix: str = "") -> Iterator[FieldDoc]:
        if "properties" in merged:
            yield from self._object(merged, f"{path}.", anchor_prefix)
        elif merged.get("type") == "array" and isinstance(merged.get("items"), dict):
            items, ref = self.resolve(merged["items"])
            if "properties" in items and ref not in self.shared:
                yield from self._object(items, f"{path}[].", anchor_prefix)
        elif isinstance(merged.get("additionalProperties"), dict):
            entry, ref = self.resolve(merged["additionalProperties"])
            entry_path = f"{path}.<{f'{ref}-id' if ref else 'name'}>"
            names, _ = self.resolve(merged.get("propertyNames", {}))
            yield FieldDoc(entry_path, anchor_of(entry_path), _type_name(entry, ref, self.shared), "",
                           False, (), str(names.get("pattern", "")), "", _description(entry), "")
            yield from self._object(entry, f"{entry_path}.")

    def _row(self, path: str, merged: dict[str, Any], ref: str, required: bool, anchor: str,
             key: str) -> FieldDoc:
        allowed = [merged["const"]] if "const" in merged else merged.get("enum", [])
        if _is_check_type(path):
            allowed = sorted(CHECK_TYPES)  # the loader validates against the registry, not the file
        items = self.resolve(merged["items"])[0] if isinstance(merged.get("items"), dict) else {}
        default = dump_yaml(merged["default"]) if "default" in merged else ""
        examples = merged.get("examples") or []
        example = (field_yaml(key, examples[0]) if key else dump_yaml(examples[0])) if examples else ""
        type_name = _type_name(merged, ref, self.shared)
        base_type = type_name.removesuffix("[]")
        pattern = str(merged.get("pattern") or items.get("pattern") or "")
        return FieldDoc(path, anchor, type_name, f"types.{base_type}" if base_type in self.shared else "",
                        required, tuple(str(v) for v in allowed), pattern, default, _description(merged),
                        example)

    # -- the example runbook --

    def example(self, node: dict[str, Any]) -> Any:
        """The node's first example; else one assembled from its parts' examples."""
        merged, _ = self.resolve(node)
        if merged.get("examples"):
            return merged["examples"][0]
        if "properties" in merged:
            # `x-example-omit`: documented with its own example, left out of the assembled runbook
            # (an analysis needs a check that reads what the example step's check does not).
            parts = {key: self.example(child) for key, child in merged["properties"].items()
                     if not child.get("x-example-omit")}
            return {key: value for key, value in parts.items() if value is not _MISSING}
        if merged.get("type") == "array" and isinstance(merged.get("items"), dict):
            item = self.example(merged["items"])
            return _MISSING if item is _MISSING else [item]
        if isinstance(merged.get("additionalProperties"), dict):
            names, _ = self.resolve(merged.get("propertyNames", {}))
            entry = self.example(merged["additionalProperties"])
            if names.get("examples") and entry is not _MISSING:
                return {names["examples"][0]: entry}
        return _MISSING


def _type_name(merged: dict[str, Any], ref: str, shared: list[str]) -> str:
    if ref in shared:
        return ref
    if "const" in merged or "enum" in merged:
        values = [merged["const"]] if "const" in merged else merged["enum"]
        return "string" if all(isinstance(v, str) for v in values) else "any"
    kind = merged.get("type")
    if kind == "array":
        items = merged.get("items") or {}
        inner = items["$ref"].rsplit("/", 1)[-1] if "$ref" in items else items.get("type", "any")
        return f"{inner}[]"
    if kind == "object" and isinstance(merged.get("additionalProperties"), dict):
        return "map"
    if "oneOf" in merged:
        return " | ".join(str(option.get("type", "any")) for option in merged["oneOf"])
    return str(kind or "any")


def _is_check_type(path: str) -> bool:
    """A step's or a fix's `check.type`: its values are the check registry's names."""
    return path.endswith("check.type")


def _description(node: dict[str, Any]) -> Text:
    return Text(str(node.get("description", "")), str(node.get("x-description-zh", "")))


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            yield node["$ref"]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)
