"""What each check type takes and returns, from the registry (for `show check:TYPE` and the site)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runbook.checks import CHECK_TYPES, load_check
from runbook.checks.base import COMMON_RESULT_FIELDS


@dataclass
class ParamDoc:
    name: str
    type: str
    required: bool
    default: Any
    description: str


@dataclass
class CheckDoc:
    name: str
    summary: dict[str, str]
    params: list[ParamDoc]
    results: dict[str, dict[str, str]]
    default_timeout: float


def describe(name: str) -> CheckDoc:
    module = load_check(name)
    schema = module.PARAMS
    required = set(schema.get("required", []))
    params = [ParamDoc(key, _type_name(spec), key in required, spec.get("default"),
                       str(spec.get("description", "")))
              for key, spec in schema.get("properties", {}).items()]
    results = {**module.RESULT_FIELDS, **{k: v for k, v in COMMON_RESULT_FIELDS.items()
                                          if k not in module.RESULT_FIELDS}}
    return CheckDoc(name, dict(module.SUMMARY), params, results, float(module.DEFAULT_TIMEOUT))


def describe_all() -> list[CheckDoc]:
    return [describe(name) for name in sorted(CHECK_TYPES)]


def _type_name(spec: dict[str, Any]) -> str:
    kind = spec.get("type")
    if isinstance(kind, list):
        return " | ".join(map(str, kind))
    if "enum" in spec:
        return " | ".join(repr(v) for v in spec["enum"])
    if "oneOf" in spec or "anyOf" in spec:
        return " | ".join(_type_name(s) for s in spec.get("oneOf") or spec.get("anyOf"))
    return str(kind or "any")

