"""`--set name=value` -> typed runbook parameters, with one-line errors (`runbook run`, and the
`set` of the MCP server's run_runbook tool)."""

from __future__ import annotations

import os
from typing import Any

from runbook.format.model import Runbook
from runbook.format.problems import did_you_mean

_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


class ParamError(ValueError):
    pass


def parse_sets(runbook: Runbook, sets: list[str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for item in sets:
        name, sep, raw = item.partition("=")
        if not sep:
            raise ParamError(f"--set {item!r}: expected NAME=VALUE")
        param = runbook.params.get(name)
        if param is None:
            known = ", ".join(runbook.params) or "none"
            raise ParamError(f"--set {name}: {runbook.id} has no parameter {name!r}"
                             f"{did_you_mean(name, runbook.params)} (its parameters: {known})")
        values[name] = _coerce(name, param.type, raw)
    for param in runbook.params.values():
        if param.required and param.name not in values and param.default is None:
            raise ParamError(f"{runbook.id} needs --set {param.name}=<{param.type}>: "
                             f"{param.help.en}")
    return values


def _coerce(name: str, kind: str, raw: str) -> Any:
    try:
        if kind == "integer":
            return int(raw)
        if kind == "number":
            return float(raw)
    except ValueError:
        wanted = "an integer" if kind == "integer" else "a number"
        raise ParamError(f"--set {name}={raw}: expected {wanted}") from None
    if kind == "boolean":
        if raw.lower() in _TRUE | _FALSE:
            return raw.lower() in _TRUE
        raise ParamError(f"--set {name}={raw}: expected true or false")
    if kind == "path":
        return os.path.abspath(os.path.expanduser(raw)) if raw else raw
    return raw
