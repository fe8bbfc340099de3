"""Parse YAML text into plain data plus the line:column of every value and key.

Only `loader.py` (and the test-file loader) call this; they turn the positions
into `file:line:col` in the problems they report. The text is checked by
`safeyaml.check_events` first: no alias, bounded depth and size.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from runbook.format.problems import DocPath
from runbook.format.safeyaml import check_events


class DuplicateKeyError(Exception):
    def __init__(self, key: str, line: int, column: int, path: DocPath) -> None:
        super().__init__(f"duplicate key {key!r}")
        self.key, self.line, self.column, self.path = key, line, column, path


@dataclass
class Positions:
    """Where each value (and each mapping key) of a parsed document starts, 1-based."""

    values: dict[DocPath, tuple[int, int]] = field(default_factory=dict)
    keys: dict[DocPath, tuple[int, int]] = field(default_factory=dict)

    def of(self, path: DocPath, prefer_key: bool = False) -> tuple[int, int]:
        """The closest known position of `path`, walking up to its parents."""
        probe = tuple(path)
        while True:
            if prefer_key and probe in self.keys:
                return self.keys[probe]
            if probe in self.values:
                return self.values[probe]
            if not probe:
                return (1, 1)
            probe = probe[:-1]


_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse(text: str) -> tuple[Any, Positions]:
    """Parse one YAML document; raises yaml.YAMLError (LimitError among them) or DuplicateKeyError."""
    check_events(text)
    # libyaml's parser when PyYAML has it (about 16x faster); same nodes, same marks.
    loader = _Loader(text)
    positions = Positions()
    try:
        root = loader.get_single_node()
        if root is None:
            return None, positions
        return _build(loader, root, (), positions), positions
    finally:
        loader.dispose()


def _mark(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def _build(loader: yaml.SafeLoader, node: yaml.Node, path: DocPath, pos: Positions) -> Any:
    pos.values[path] = _mark(node)
    if isinstance(node, yaml.MappingNode):
        own = {id(k) for k, _ in node.value}
        loader.flatten_mapping(node)  # `<<: *base` pairs first, then the mapping's own
        out: dict[Any, Any] = {}
        merged: set[Any] = set()
        for key_node, value_node in node.value:
            key = _construct(loader, key_node)
            key = key if isinstance(key, (str, int)) else str(key)
            child = (*path, key)
            from_merge = id(key_node) not in own
            # A key of the mapping's own overrides one merged in (YAML's merge key); twice in
            # the mapping's own keys is an error.
            if key in out and not from_merge and key not in merged:
                raise DuplicateKeyError(str(key), *_mark(key_node), child)
            if from_merge:
                merged.add(key)
            else:
                merged.discard(key)
            pos.keys[child] = _mark(key_node)
            out[key] = _build(loader, value_node, child, pos)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_build(loader, item, (*path, i), pos) for i, item in enumerate(node.value)]
    return _construct(loader, node)


def _construct(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    """A scalar's value. PyYAML's constructors raise plain ValueError, KeyError and the like
    for tagged values they cannot build (`!!int abc`, `!!timestamp x`): make those YAML errors
    at the value, like any other syntax error."""
    try:
        return loader.construct_object(node, deep=True)
    except yaml.YAMLError:
        raise
    except (ValueError, KeyError, AttributeError, TypeError, OverflowError) as exc:
        raise yaml.constructor.ConstructorError(
            None, None, f"cannot read {node.tag} value {str(node.value)[:40]!r} ({type(exc).__name__})",
            node.start_mark) from None
