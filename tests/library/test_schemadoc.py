"""The format reference: every schema property documented in both languages, examples that
validate, the fields an author meets, and an example runbook that loads and lints."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from runbook.checks import CHECK_TYPES
from runbook.format.loader import load_text, runbook_schema
from runbook.library.runbooks import load_library
from runbook.library.schemadoc import anchor_of, example_yaml, raw_schema, reference

ROOT = Path(__file__).resolve().parents[2]
CJK = re.compile(r"[\u4e00-\u9fff]")


def documented_nodes(schema: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(JSON pointer, node) of every node that must carry descriptions: each property, each
    definition, and each map entry written inline (`params.<name>`)."""

    def walk(node: Any, pointer: str) -> Iterator[tuple[str, dict[str, Any]]]:
        if isinstance(node, list):
            for i, item in enumerate(node):
                yield from walk(item, f"{pointer}/{i}")
            return
        if not isinstance(node, dict):
            return
        for key, value in node.items():
            if key in ("properties", "$defs") and isinstance(value, dict):
                for name, child in value.items():
                    yield f"{pointer}/{key}/{name}", child
            elif key == "additionalProperties" and isinstance(value, dict) and "$ref" not in value:
                yield f"{pointer}/{key}", value
        for key, value in node.items():
            if key not in ("examples", "default", "const", "enum"):
                yield from walk(value, f"{pointer}/{key}")

    return walk(schema, "#")


def undocumented(schema: dict[str, Any]) -> list[str]:
    problems = []
    for pointer, node in documented_nodes(schema):
        en, zh = node.get("description", ""), node.get("x-description-zh", "")
        if not en.strip():
            problems.append(f"{pointer}: no description")
        if not CJK.search(zh) or zh.strip() == en.strip():
            problems.append(f"{pointer}: no Chinese description (x-description-zh)")
    return problems


def test_every_property_and_definition_has_both_descriptions() -> None:
    schema = raw_schema()
    assert undocumented(schema) == []
    pointers = [p for p, _ in documented_nodes(schema)]
    # The walk reaches deep fields and inline map entries, not only the top level.
    assert "#/$defs/conclusion/properties/fixes/items/properties/verify/properties/check/properties/timeout" \
        in pointers
    assert "#/properties/params/additionalProperties" in pointers
    assert "#/properties/changelog/items/properties/fp" in pointers


def test_a_field_added_without_descriptions_is_caught() -> None:
    schema = copy.deepcopy(raw_schema())
    schema["$defs"]["step"]["properties"]["retries"] = {"type": "integer", "description": "How often"}
    schema["properties"]["params"]["additionalProperties"].pop("x-description-zh")
    assert undocumented(schema) == [
        "#/properties/params/additionalProperties: no Chinese description (x-description-zh)",
        "#/$defs/step/properties/retries: no Chinese description (x-description-zh)",
    ]


def example_problems(raw: dict[str, Any], checked: dict[str, Any]) -> list[str]:
    """Every `examples` value in `raw`, validated against the node at the same place in
    `checked` (the loader's schema, whose check types come from the registry)."""
    registry = Registry().with_resource(checked["$id"], Resource.from_contents(checked))
    problems = []
    for pointer, node in _nodes_with_examples(raw, "#"):
        validator = Draft202012Validator({"$ref": checked["$id"] + pointer}, registry=registry)
        for example in node["examples"]:
            problems += [f"{pointer}: {example!r}: {e.message}" for e in validator.iter_errors(example)]
    return problems


def _nodes_with_examples(node: Any, pointer: str) -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(node, dict):
        if "examples" in node:
            yield pointer, node
        for key, value in node.items():
            if key != "examples":
                yield from _nodes_with_examples(value, f"{pointer}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _nodes_with_examples(value, f"{pointer}/{i}")


def test_every_example_validates_against_its_subschema() -> None:
    raw = raw_schema()
    assert len(list(_nodes_with_examples(raw, "#"))) > 40
    assert example_problems(raw, runbook_schema()) == []


def test_a_bad_example_is_caught() -> None:
    raw = copy.deepcopy(raw_schema())
    checked = copy.deepcopy(runbook_schema())
    raw["$defs"]["duration"]["examples"].append("5 seconds")
    raw["$defs"]["step"]["properties"]["check"]["properties"]["type"]["examples"] = ["gpus"]
    problems = example_problems(raw, checked)
    assert len(problems) == 2
    assert problems[0].startswith("#/$defs/duration: '5 seconds':")
    assert problems[1].startswith("#/$defs/step/properties/check/properties/type: 'gpus': 'gpus' is not")


def test_field_list_has_what_an_author_writes() -> None:
    ref = reference()
    fields = {f.path: f for f in ref.fields}
    for top in raw_schema()["properties"]:
        assert top in fields
    effect = fields["conclusions.<conclusion-id>.fixes[].effect"]
    assert (effect.anchor, effect.required) == ("conclusions.fixes.effect", True)
    assert effect.allowed == ("read-only", "changes-state", "disruptive")
    assert effect.example == "effect: disruptive"
    timeout = fields["steps.<step-id>.check.timeout"]
    assert (timeout.anchor, timeout.type, timeout.type_anchor, timeout.required) == \
        ("steps.check.timeout", "duration", "types.duration", False)
    assert fields["steps.<step-id>.check.type"].allowed == tuple(sorted(CHECK_TYPES))
    assert fields["conclusions.<conclusion-id>.fixes[].verify.check.type"].lists_check_types
    assert fields["steps.<step-id>.check.with"].example == "with: {port: '{{ params.port }}'}"
    assert fields["params.<name>"].pattern == "^[a-z_][a-z0-9_]*$"
    assert fields["params.<name>.required"].default == "false"
    assert fields["params.<name>.type"].allowed == ("string", "path", "integer", "number", "boolean")
    assert fields["apiVersion"].allowed == ("runbook/v1",)
    assert fields["tags"].type == "string[]" and fields["symptoms"].type == "text[]"
    assert fields["steps"].type == "map" and fields["steps.<step-id>"].anchor == "steps.step-id"
    assert fields["title"].description.zh.startswith("用几个词概括问题")
    # Shared definitions are types, documented once and linked, not repeated under each field.
    assert "title.en" not in fields and fields["title"].type_anchor == "types.text"
    types = {f.anchor: f for f in ref.types}
    assert set(types) == {"types.id", "types.target", "types.text", "types.text.en", "types.text.zh",
                          "types.text.fp", "types.fingerprint", "types.duration"}
    assert types["types.duration"].type == "number | string"
    anchors = [f.anchor for f in [*ref.fields, *ref.types]]
    assert len(anchors) == len(set(anchors))


def test_anchor_drops_placeholders_and_list_marks() -> None:
    assert anchor_of("steps.<step-id>.check.timeout") == "steps.check.timeout"
    assert anchor_of("conclusions.<conclusion-id>.fixes[].verify.passes") == "conclusions.fixes.verify.passes"
    assert anchor_of("params.<name>") == "params.name"
    assert anchor_of("signatures[].goto") == "signatures.goto"


def test_check_types_come_from_the_registry() -> None:
    checks = reference().check_types
    assert [c.name for c in checks] == sorted(CHECK_TYPES)
    port = next(c for c in checks if c.name == "port")
    assert port.summary.en.startswith("TCP port") and CJK.search(port.summary.zh)


def _present(value: Any, parts: list[str]) -> bool:
    """Whether a field path (`steps.<step-id>.check.type`) has a value in an example document."""
    if not parts:
        return True
    head, rest = parts[0], parts[1:]
    key, is_list = head.removesuffix("[]"), head.endswith("[]")
    if head.startswith("<"):
        return isinstance(value, dict) and bool(value) and all(_present(v, rest) for v in value.values())
    if not isinstance(value, dict) or key not in value:
        return False
    if is_list:
        return bool(value[key]) and all(_present(item, rest) for item in value[key])
    return _present(value[key], rest)


def test_example_runbook_is_complete_valid_and_loads() -> None:
    text = reference().example
    document = yaml.safe_load(text)
    Draft202012Validator(runbook_schema()).validate(document)
    loaded = load_text(text, "master-port-busy.yaml")
    assert loaded.ok and loaded.problems == []
    assert loaded.runbook is not None and loaded.runbook.start in loaded.runbook.steps
    missing = [f.path for f in reference().fields if not _present(document, f.path.split("."))]
    # changelog fp: written by `runbook i18n stamp`, never by hand; an analysis needs a check
    # the example step does not run (x-example-omit)
    assert missing == ["steps.<step-id>.analysis", "changelog[].fp"]
    assert example_yaml(raw_schema()) == text


def test_example_runbook_lints_beside_the_repository_runbooks(tmp_path: Path, runbook_cli) -> None:
    """Its hand-over (`ddp-errors:start`) and see_also name runbooks that exist."""
    target = tmp_path / "master-port-busy.yaml"
    target.write_text(reference().example, "utf-8")
    library = load_library([tmp_path, ROOT / "runbooks"])
    assert library.get("master-port-busy") is not None
    assert [str(p) for p in library.problems if target.name in p.file] == []
    done = runbook_cli("lint", str(target), str(ROOT / "runbooks"))
    assert target.name not in done.stdout + done.stderr
    # Alone, it is linted inside the library on the search path, so the names resolve too.
    alone = runbook_cli("lint", str(target))
    assert (alone.returncode, alone.stdout) == (0, ""), alone.stdout


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_descriptions_read_as_their_language(lang: str) -> None:
    rows = [*reference().fields, *reference().types]
    texts = [f.description.get(lang) for f in rows]
    assert all(texts)
    with_cjk = [t for t in texts if CJK.search(t)]
    assert len(with_cjk) == (len(texts) if lang == "zh" else 0)


def test_the_limits_the_reference_states_are_the_ones_enforced() -> None:
    from runbook.format import loader, safeyaml

    rows = {row.what.en: row.limit for row in reference().limits}
    assert rows["File size: a runbook, its test file, an inventory"] == "1,048,576 bytes (1 MiB)"
    assert rows["Nesting depth of one document"] == str(safeyaml.MAX_DEPTH)
    assert rows["Values in one document, aliases expanded"] == f"{safeyaml.MAX_NODES:,}"
    assert rows["Steps in one runbook"] == str(loader.SIZE_LIMITS[("steps",)][0])
    assert rows["Branches of one step"] == str(loader.MAX_BRANCHES)
    assert all(row.what.zh and row.what.en != row.what.zh for row in reference().limits)
