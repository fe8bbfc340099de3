"""YAML -> validated `Runbook`. The only module that reads runbook files.

Every problem in a file is collected (schema, references, check parameters,
expressions, translations, taxonomy) and reported with file:line:column and
the path inside the document; nothing here raises on bad input.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from runbook.checks import CHECK_TYPES, load_check
from runbook.format import expr, patterns, taxonomy
from runbook.format.engine_version import (
    API_VERSION,
    API_VERSIONS,
    RequiresError,
    older_api_version,
    unmet_requires,
    unsupported_api_version,
)
from runbook.format.model import (
    Analysis,
    Branch,
    ChangelogEntry,
    Check,
    Conclusion,
    Fix,
    Param,
    Runbook,
    Signature,
    Step,
    Text,
    Verify,
)
from runbook.format.problems import DocPath, Problem, did_you_mean
from runbook.format.safeyaml import LimitError, read_text
from runbook.format.todo import MESSAGE as TODO_MESSAGE
from runbook.format.todo import holds_marker
from runbook.format.yamlpos import DuplicateKeyError, Positions, parse

_PARAM_REF = re.compile(r"\bparams\.([A-Za-z_][A-Za-z0-9_]*)")
# How big one runbook may be: far above the largest in the library (tens of steps), and low
# enough that a hostile file cannot make lint, triage or a run slow. Path -> (limit, what).
SIZE_LIMITS: dict[tuple[str, ...], tuple[int, str]] = {
    ("steps",): (500, "steps"),
    ("conclusions",): (500, "conclusions"),
    ("signatures",): (500, "signatures"),
    ("params",): (100, "parameters"),
}
MAX_BRANCHES = 100  # per step
MAX_FIXES = 50  # per conclusion


@dataclass
class Compiled:
    """Expressions and parameter templates compiled at load time, by step id."""

    when: dict[tuple[str, int], expr.Expression] = field(default_factory=dict)
    with_: dict[str, Any] = field(default_factory=dict)
    fix_runs: dict[tuple[str, int], Any] = field(default_factory=dict)
    fix_verify_with: dict[tuple[str, int], Any] = field(default_factory=dict)  # (conclusion, fix)
    fix_verify_passes: dict[tuple[str, int], expr.Expression] = field(default_factory=dict)
    findings: dict[str, Any] = field(default_factory=dict)  # conclusion -> {"en", "zh"} templates


@dataclass
class LoadResult:
    path: str
    runbook: Runbook | None
    compiled: Compiled
    problems: list[Problem]
    # The parsed document and its positions, for checks beyond the loader's (lint's
    # versioning and translations, cross-references) without reading the file again.
    data: Any = None
    positions: Positions | None = None

    @property
    def ok(self) -> bool:
        return self.runbook is not None and not any(p.severity == "error" for p in self.problems)


@lru_cache(maxsize=1)
def runbook_schema() -> dict[str, Any]:
    """The shipped JSON Schema, with the check types filled in from the registry."""
    text = resources.files("runbook").joinpath("schema/runbook.v1.json").read_text("utf-8")
    schema = json.loads(text)
    schema["$defs"]["step"]["properties"]["check"]["properties"]["type"] = {
        "enum": sorted(CHECK_TYPES)}
    return schema


MAX_TIMEOUT_S = 86400  # a check's timeout; the schema's duration maximum


def parse_duration(value: Any) -> float:
    """`5s`, `500ms`, `2m` or a number of seconds -> seconds."""
    if isinstance(value, (int, float)):
        return float(value)
    match = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m)", str(value))
    if not match:
        raise ValueError(f"not a duration: {value!r}")
    number, unit = float(match.group(1)), match.group(2)
    return number / 1000 if unit == "ms" else number * 60 if unit == "m" else number


def load_file(path: str | Path) -> LoadResult:
    """Load and check one runbook file. Cross-runbook references are checked by the library."""
    source = read_source(path)
    if isinstance(source, LoadResult):
        return source
    text, raw = source
    return load_text(text, str(path), digest=file_digest(raw))


def read_source(path: str | Path) -> tuple[str, bytes] | LoadResult:
    """The text and bytes of a runbook file, or the failed result of one that cannot be read."""
    shown = str(path)
    try:
        return read_text(path)
    except OSError as exc:
        return _failed(shown, (1, 1), (), f"cannot read file: {exc.strerror or exc}")
    except LimitError as exc:
        return _failed(shown, (exc.line, exc.column), (), exc.message)


def file_digest(raw: bytes) -> str:
    """What a runbook's `digest` is: the sha256 of its file's bytes."""
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def _failed(file: str, where: tuple[int, int], path: DocPath, message: str) -> LoadResult:
    return LoadResult(file, None, Compiled(), [Problem(file, *where, path, message)])


def load_text(text: str, file: str, digest: str = "") -> LoadResult:
    try:
        data, positions = parse(text)
    except DuplicateKeyError as exc:
        return _failed(file, (exc.line, exc.column), exc.path, f"duplicate key {exc.key!r}")
    except LimitError as exc:
        return _failed(file, (exc.line, exc.column), (), exc.message)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        return _failed(file, where, (), f"YAML syntax error: {problem}")
    if not isinstance(data, dict):
        return _failed(file, (1, 1), (), "a runbook is a YAML mapping (apiVersion, id, steps, ...)")
    checker = _Checker(file, data, positions)
    if not (checker.requires_ok() and checker.api_version_ok() and checker.sizes_ok()):
        return LoadResult(file, None, Compiled(), checker.problems, data, positions)
    checker.validate_schema()
    checker.check_semantics()
    runbook = None
    if not any(p.severity == "error" for p in checker.problems):
        runbook = _build(data, file, digest or "sha256:" + hashlib.sha256(text.encode()).hexdigest())
    # `runbook new`'s markers fail lint (and `ok`), but a draft still builds: its article's
    # links resolve and its pages can be previewed.
    checker.check_todo_markers(data, ())
    checker.problems.sort(key=lambda p: (p.line, p.column))
    return LoadResult(file, runbook, checker.compiled, checker.problems, data, positions)


# ---- a loaded file as plain data, for the load cache (library/cache.py) ----


def snapshot(result: LoadResult) -> tuple[Any, ...]:
    """What `restore` needs to give this result again without parsing or checking: plain data
    only (marshal writes it; ValueError there for a YAML value it cannot hold, e.g. a date).
    The positions are kept apart (`positions_snapshot`): only a problem being reported reads them."""
    return result.runbook is not None, result.data, plain_problems(result.problems)


def plain_problems(problems: Iterable[Problem]) -> list[tuple[Any, ...]]:
    """Problems as plain data, the file left out (the load cache and the library index keep
    them per file)."""
    return [(p.line, p.column, p.path, p.message, p.severity) for p in problems]


def restore_problems(file: str, plain: Iterable[Any]) -> list[Problem]:
    """The problems `plain_problems` gave, in `file`; TypeError or ValueError when `plain` is
    not that."""
    return [Problem(file, int(line), int(col), tuple(path), str(message), str(severity))
            for line, col, path, message, severity in plain]


def positions_snapshot(result: LoadResult) -> tuple[Any, ...]:
    """The positions of a loaded file as plain data; `()` for a file that did not parse."""
    positions = result.positions
    return (positions.values, positions.keys) if positions is not None else ()


def restore_positions(plain: Any) -> Positions | None:
    """The Positions `positions_snapshot` took (None for `()`); ValueError when `plain` is not
    that (a missing entry too: None is not a snapshot)."""
    if plain == ():
        return None
    values, keys = plain
    if not (isinstance(values, dict) and isinstance(keys, dict)):
        raise ValueError("not positions")
    return Positions(values, keys)


def restore(plain: Any, file: str, digest: str,
            positions: Callable[[], Positions | None]) -> LoadResult | None:
    """The result `snapshot` took of `file`, or None when `plain` is not one. `positions` gives
    the file's positions when something first asks for them."""
    try:
        built, data, found = plain
        problems = restore_problems(file, found)
        runbook = _build(data, file, digest) if built else None
    except (TypeError, ValueError, KeyError, AttributeError, IndexError):
        return None
    compiled = _LazyCompiled(file, data) if runbook is not None else Compiled()
    result = _Restored(file, runbook, compiled, problems, data)
    result.positions_from = positions
    return result


class _Restored(LoadResult):
    """A LoadResult from the cache: its positions are read when a problem first needs them."""

    positions_from: Callable[[], Positions | None] | None = None

    @property  # type: ignore[override]
    def positions(self) -> Positions | None:
        read = self.positions_from
        if read is not None:
            self.__dict__["_positions"] = read()
            self.positions_from = None
        return self.__dict__.get("_positions")

    @positions.setter
    def positions(self, value: Positions | None) -> None:
        self.__dict__["_positions"] = value


class _LazyCompiled(Compiled):
    """The Compiled of a result restored from the cache: its expressions are compiled on first
    use, so a command that loads a runbook only to read it compiles nothing. A lock, as the
    walk's threads may all ask at once."""

    def __init__(self, file: str, data: Any) -> None:
        self.__dict__.update(_source=(file, data), _lock=threading.Lock())

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or "_lock" not in self.__dict__:
            raise AttributeError(name)
        with self.__dict__["_lock"]:
            source = self.__dict__.pop("_source", None)
            if source is not None:
                checker = _Checker(source[0], source[1], Positions(), compile_only=True)
                checker.check_semantics()
                self.__dict__.update(vars(checker.compiled))
        if name in self.__dict__:
            return self.__dict__[name]
        raise AttributeError(name)


class _Checker:
    """Collects the problems of one parsed document."""

    def __init__(self, file: str, data: dict[str, Any], positions: Positions,
                 compile_only: bool = False) -> None:
        self.file, self.data, self.positions = file, data, positions
        self.problems: list[Problem] = []
        self.compiled = Compiled()
        self.bad_targets = False  # a typo'd goto would also make its target look unreachable
        # A document that passed every check once (restored from the load cache) is only
        # compiled: the checks that compile nothing (parameters against each check's schema,
        # taxonomy ids, reachability, texts) are skipped, and so is importing jsonschema.
        self.compile_only = compile_only

    def add(self, path: DocPath, message: str, *, key: bool = False, severity: str = "error") -> None:
        line, col = self.positions.of(path, prefer_key=key)
        self.problems.append(Problem(self.file, line, col, path, message, severity))

    # -- apiVersion, size and schema --

    def sizes_ok(self) -> bool:
        """False when the runbook has more steps, branches, conclusions... than SIZE_LIMITS."""
        before = len(self.problems)
        for path, (limit, what) in SIZE_LIMITS.items():
            self._at_most(path, self.data.get(path[0]), limit, what)
        for name, step in _mapping(self.data.get("steps")).items():
            branches = _mapping(step).get("branches")
            self._at_most(("steps", name, "branches"), branches, MAX_BRANCHES, "branches")
        for name, conclusion in _mapping(self.data.get("conclusions")).items():
            fixes = _mapping(conclusion).get("fixes")
            self._at_most(("conclusions", name, "fixes"), fixes, MAX_FIXES, "fixes")
        return len(self.problems) == before

    def _at_most(self, path: DocPath, value: Any, limit: int, what: str) -> None:
        if isinstance(value, (dict, list)) and len(value) > limit:
            self.add(path, f"{len(value)} {what}: at most {limit} in one runbook "
                     "(split it into runbooks that hand over with `goto: other-runbook:step`)", key=True)

    def requires_ok(self) -> bool:
        """False when this engine is outside the runbook's `requires`: that one error is all
        the file reports, since its other problems are likely a newer format's fields."""
        spec = self.data.get("requires")
        if not isinstance(spec, str):
            return True  # absent, or the schema reports its type
        try:
            unmet = unmet_requires(spec)
        except RequiresError as exc:
            self.add(("requires",), str(exc))
            return True
        if unmet:
            self.add(("requires",), unmet)
        return unmet is None

    def api_version_ok(self) -> bool:
        version = self.data.get("apiVersion")
        if version is None:
            self.add((), f"missing apiVersion (expected 'apiVersion: {API_VERSION}')")
            return False
        if version == API_VERSION:
            return True
        if isinstance(version, str) and version in API_VERSIONS:
            self.add(("apiVersion",), older_api_version(version, self.file))
            return False
        self.add(("apiVersion",), unsupported_api_version(version, API_VERSION))
        return False

    def validate_schema(self) -> None:
        from jsonschema import Draft202012Validator

        validator = Draft202012Validator(runbook_schema())
        for error in validator.iter_errors(self.data):
            self._schema_problem(error)

    def _schema_problem(self, error: Any) -> None:
        path: DocPath = tuple(error.absolute_path)
        kind, value = error.validator, error.instance
        if kind == "required":
            missing = [k for k in error.validator_value if k not in (value or {})]
            for name in missing:
                what = {"zh": "missing Chinese translation (zh)",
                        "en": "missing English text (en)"}.get(name, f"missing required field {name!r}")
                self.add(path, what)
        elif kind == "additionalProperties":
            allowed = list(error.schema.get("properties", {}))
            for name in [k for k in value if k not in allowed]:
                self.add((*path, name), f"unknown field {name!r}{did_you_mean(name, allowed)}"
                         f" (expected one of: {', '.join(allowed)})", key=True)
        elif kind == "enum":
            hint = did_you_mean(str(value), map(str, error.validator_value))
            choices = ", ".join(map(str, error.validator_value))
            self.add(path, f"{value!r} is not allowed{hint} (expected one of: {choices})")
        elif kind == "pattern" and path and path[-1] in ("goto", "default", "start", "id"):
            self.add(path, f"{value!r} is not a valid id (lowercase letters, digits and '-';"
                     " another runbook's step as 'runbook-id:step-id')")
        elif kind == "pattern" and path and path[-1] == "version":
            self.add(path, f"{value!r} is not a semantic version (expected MAJOR.MINOR.PATCH,"
                     " e.g. 1.0.0)")
        elif kind == "pattern":
            self.add(path, f"{value!r} does not match the expected form {error.validator_value}")
        elif kind == "oneOf" and path and path[-1] == "timeout":
            self.add(path, f"{str(value)[:40]!r} is not a duration (expected e.g. 5s, 500ms, 2m or"
                     " seconds, at most a day)")
        elif kind == "type":
            self.add(path, f"expected {error.validator_value}, got {type(value).__name__}"
                     f" ({json.dumps(value, default=str)[:40]})")
        elif kind == "propertyNames":
            self.add(path, f"bad name: {error.message}", key=True)
        elif kind == "minLength":
            self.add(path, "must not be empty")
        else:
            self.add(path, error.message)

    # -- meaning --

    def check_semantics(self) -> None:
        steps = self.data.get("steps") if isinstance(self.data.get("steps"), dict) else {}
        conclusions = self.data.get("conclusions")
        conclusions = conclusions if isinstance(conclusions, dict) else {}
        overlap = set(steps) & set(conclusions)
        for name in sorted(overlap):
            self.add(("conclusions", name), f"{name!r} is both a step and a conclusion", key=True)
        targets = [*steps, *conclusions]
        start = self.data.get("start")
        if isinstance(start, str) and start not in steps:
            self.add(("start",), f"no step named {start!r}{did_you_mean(start, steps)}")
        params = self.data.get("params") if isinstance(self.data.get("params"), dict) else {}
        for step_id, step in steps.items():
            if isinstance(step, dict):
                self._check_step(step_id, step, targets, params)
        for cid, conclusion in conclusions.items():
            if isinstance(conclusion, dict):
                self._check_conclusion(cid, conclusion)
        if not self.compile_only:
            self._check_signatures(targets)
            self._check_reachable(steps, conclusions, start)
            self._check_texts(self.data, ())

    def _check_signatures(self, targets: list[str]) -> None:
        signatures = self.data.get("signatures")
        for i, signature in enumerate(signatures if isinstance(signatures, list) else []):
            if not isinstance(signature, dict):
                continue  # the schema reports it
            pattern = signature.get("pattern")
            if isinstance(pattern, str):
                reason = patterns.portability_problem(pattern)
                if reason:
                    self.add(("signatures", i, "pattern"), f"pattern {reason}")
            if "goto" in signature:
                self._check_target(("signatures", i, "goto"), signature["goto"], targets)
            self._check_signature_conclusion(i, signature)

    def _check_signature_conclusion(self, i: int, signature: dict[str, Any]) -> None:
        """A signature names the one failure its line shows: `conclusion`, or a conclusion as
        its `goto`. Without either, triage can only guess from the text (a warning)."""
        conclusions = self.data.get("conclusions") if isinstance(self.data.get("conclusions"), dict) else {}
        named, goto = signature.get("conclusion"), signature.get("goto")
        if isinstance(named, str) and named not in conclusions:
            self.add(("signatures", i, "conclusion"), f"no conclusion named {named!r}"
                     f"{did_you_mean(named, list(conclusions))}")
        elif named is None and goto not in conclusions:
            self.add(("signatures", i), "the signature names no conclusion: add `conclusion:`"
                     " (the failure this line shows), so triage names it", severity="warning")

    def _check_target(self, path: DocPath, target: Any, targets: list[str]) -> None:
        if not isinstance(target, str) or ":" in target:
            return  # another runbook's step: checked by the library, which knows them all
        if target not in targets:
            self.bad_targets = True
            self.add(path, f"no step or conclusion named {target!r}{did_you_mean(target, targets)}")

    def _check_step(self, step_id: str, step: dict[str, Any], targets: list[str],
                    params: dict[str, Any]) -> None:
        base: DocPath = ("steps", step_id)
        branches = step.get("branches") or []
        if not branches and "default" not in step:
            self.add(base, "step has no way out: give it branches or a default", key=True)
        for i, branch in enumerate(branches if isinstance(branches, list) else []):
            if not isinstance(branch, dict):
                continue
            self._check_target((*base, "branches", i, "goto"), branch.get("goto"), targets)
            when = branch.get("when")
            if isinstance(when, str):
                self._compile_when((*base, "branches", i, "when"), step_id, i, when, params)
        if "default" in step:
            self._check_target((*base, "default"), step["default"], targets)
        check = step.get("check")
        if isinstance(check, dict):
            self._check_check((*base, "check"), step_id, check, params)

    def _compile_when(self, path: DocPath, step_id: str, index: int, source: str,
                      params: dict[str, Any]) -> None:
        try:
            self.compiled.when[(step_id, index)] = expr.compile_expression(source)
        except expr.ExprError as exc:
            self.add(path, f"bad condition {source!r}: {exc}")
            return
        self._check_param_refs(path, source, params)

    def _check_param_refs(self, path: DocPath, source: str, params: dict[str, Any]) -> None:
        for name in _PARAM_REF.findall(source):
            if name not in params:
                self.add(path, f"params.{name} is not declared under params:"
                         f"{did_you_mean(name, params)}")

    def _check_check(self, path: DocPath, step_id: str, check: dict[str, Any],
                     params: dict[str, Any]) -> None:
        ctype = check.get("type")
        self._check_timeout(path, check.get("timeout"))
        if not isinstance(ctype, str) or ctype not in CHECK_TYPES:
            return  # reported by the schema's enum
        self._check_analysis(path[:-1], ctype)
        with_ = check.get("with") if isinstance(check.get("with"), dict) else {}
        try:
            self.compiled.with_[step_id] = expr.compile_value(with_, _shell_params(ctype))
        except expr.ExprError as exc:
            self.add((*path, "with"), f"bad template: {exc}")
        self._check_param_refs((*path, "with"), json.dumps(with_, default=str), params)
        literal = {k: v for k, v in with_.items() if not (isinstance(v, str) and "{{" in v)}
        self._check_params_schema(path, ctype, literal, templated=set(with_) - set(literal))

    def _check_analysis(self, step_path: DocPath, ctype: str) -> None:
        """An analysis reads the results of particular checks: say so when a step pairs it with
        another (the schema has already refused an unknown name)."""
        from runbook import jobs

        step = self.data["steps"].get(step_path[-1]) if isinstance(self.data.get("steps"), dict) else None
        analysis = step.get("analysis") if isinstance(step, dict) else None
        name = analysis.get("type") if isinstance(analysis, dict) else analysis
        if isinstance(name, str) and name in jobs.READS and ctype not in jobs.READS[name]:
            self.add((*step_path, "analysis"), f"analysis {name!r} reads the results of "
                     f"{', '.join(jobs.READS[name])} checks, not {ctype!r}")

    def _check_timeout(self, path: DocPath, value: Any) -> None:
        try:
            seconds = parse_duration(value) if isinstance(value, str) else 0
        except ValueError:
            return  # not the duration form: the schema says so
        if seconds > MAX_TIMEOUT_S:
            self.add((*path, "timeout"), f"{value!r} is longer than a day ({MAX_TIMEOUT_S} s)")

    def _check_params_schema(self, path: DocPath, ctype: str, literal: dict[str, Any],
                             templated: set[str]) -> None:
        if self.compile_only:
            return
        from jsonschema import Draft202012Validator

        module = load_check(ctype)
        schema = dict(module.PARAMS)
        # Templated values are typed only at run time; don't demand them here.
        schema["required"] = [r for r in schema.get("required", []) if r not in templated]
        known = list(schema.get("properties", {}))
        for name in templated - set(known):
            self.add((*path, "with", name), f"check {ctype!r} has no parameter {name!r}"
                     f"{did_you_mean(name, known)} (its parameters: {', '.join(known)})", key=True)
        for error in Draft202012Validator(schema).iter_errors(literal):
            where: DocPath = (*path, "with", *error.absolute_path)
            if error.validator == "additionalProperties":
                for name in [k for k in error.instance if k not in known]:
                    self.add((*path, "with", name), f"check {ctype!r} has no parameter {name!r}"
                             f"{did_you_mean(name, known)} (its parameters: {', '.join(known)})",
                             key=True)
            else:
                self.add(where, f"bad parameter for check {ctype!r}: {error.message}")

    def _check_verify(self, path: DocPath, key: tuple[str, int], verify: dict[str, Any]) -> None:
        params = self.data.get("params") if isinstance(self.data.get("params"), dict) else {}
        check = verify.get("check")
        if isinstance(check, dict):
            self._check_timeout((*path, "check"), check.get("timeout"))
        if isinstance(check, dict) and str(check.get("type")) not in CHECK_TYPES:
            self.add((*path, "check", "type"), f"unknown check type {check.get('type')!r}"
                     f"{did_you_mean(str(check.get('type')), CHECK_TYPES)}")
        elif isinstance(check, dict):
            with_ = check.get("with") if isinstance(check.get("with"), dict) else {}
            try:
                shell = _shell_params(str(check["type"]))
                self.compiled.fix_verify_with[key] = expr.compile_value(with_, shell)
            except expr.ExprError as exc:
                self.add((*path, "check", "with"), f"bad template: {exc}")
            literal = {k: v for k, v in with_.items() if not (isinstance(v, str) and "{{" in v)}
            self._check_params_schema((*path, "check"), str(check["type"]), literal,
                                      templated=set(with_) - set(literal))
        passes = verify.get("passes")
        if isinstance(passes, str):
            try:
                self.compiled.fix_verify_passes[key] = expr.compile_expression(passes)
            except expr.ExprError as exc:
                self.add((*path, "passes"), f"bad condition {passes!r}: {exc}")
                return
            self._check_param_refs((*path, "passes"), passes, params)

    def _check_taxonomy(self, base: DocPath, ids: list[Any]) -> None:
        known = taxonomy.load()
        for i, tid in enumerate(ids):
            if isinstance(tid, str) and tid not in known:  # other types: the schema's error
                self.add((*base, "taxonomy", i), f"unknown taxonomy id {tid!r}"
                         f"{did_you_mean(str(tid), known)} (see taxonomy.yaml)")

    def _check_conclusion(self, cid: str, conclusion: dict[str, Any]) -> None:
        base: DocPath = ("conclusions", cid)
        ids = conclusion.get("taxonomy") if isinstance(conclusion.get("taxonomy"), list) else []
        if not self.compile_only:
            self._check_taxonomy(base, ids)
        finding = conclusion.get("finding")
        if isinstance(finding, dict):
            try:
                self.compiled.findings[cid] = expr.compile_value(
                    {lang: finding[lang] for lang in ("en", "zh") if isinstance(finding.get(lang), str)})
            except expr.ExprError as exc:
                self.add((*base, "finding"), f"bad template: {exc}")
        fixes = conclusion.get("fixes") if isinstance(conclusion.get("fixes"), list) else []
        for i, fix in enumerate(fixes):
            run = fix.get("run") if isinstance(fix, dict) else None
            if isinstance(run, str):
                try:
                    self.compiled.fix_runs[(cid, i)] = expr.compile_command(run)
                except expr.ExprError as exc:
                    self.add((*base, "fixes", i, "run"), f"bad command template: {exc}")
            verify = fix.get("verify") if isinstance(fix, dict) else None
            if isinstance(verify, dict):
                self._check_verify((*base, "fixes", i, "verify"), (cid, i), verify)
        if not ids and conclusion.get("severity") in ("warning", "critical"):
            self.add((*base, "taxonomy"), "a warning or critical conclusion needs at least one "
                     "taxonomy id (see taxonomy.yaml)")

    def _check_reachable(self, steps: dict[str, Any], conclusions: dict[str, Any],
                         start: Any) -> None:
        if not isinstance(start, str) or start not in steps or self.bad_targets:
            return
        seen, todo = set(), [start]
        while todo:
            current = todo.pop()
            if current in seen:
                continue
            seen.add(current)
            step = steps.get(current)
            if isinstance(step, dict):
                outs = [b.get("goto") for b in step.get("branches") or [] if isinstance(b, dict)]
                todo.extend(t for t in [*outs, step.get("default")] if isinstance(t, str))
        for section, items in (("steps", steps), ("conclusions", conclusions)):
            for name in items:
                if name not in seen:
                    self.add((section, name), f"{name!r} is never reached from start "
                             f"{start!r}", key=True)

    def check_todo_markers(self, value: Any, path: DocPath) -> None:
        """Any string (text, `when`, check parameter, command) still holding `runbook new`'s marker."""
        if isinstance(value, dict):
            for key, child in value.items():
                self.check_todo_markers(child, (*path, key))
        elif isinstance(value, list):
            for i, child in enumerate(value):
                self.check_todo_markers(child, (*path, i))
        elif holds_marker(value):
            self.add(path, TODO_MESSAGE)

    def _check_texts(self, value: Any, path: DocPath) -> None:
        """Flag texts whose Chinese is a copy of the English (an untranslated field)."""
        if isinstance(value, dict):
            en, zh = value.get("en"), value.get("zh")
            if isinstance(en, str) and isinstance(zh, str) and _looks_untranslated(en, zh):
                self.add((*path, "zh"), "Chinese text is a copy of the English (translate it)")
            for key, child in value.items():
                self._check_texts(child, (*path, key))
        elif isinstance(value, list):
            for i, child in enumerate(value):
                self._check_texts(child, (*path, i))


def _shell_params(check_type: str) -> tuple[str, ...]:
    """Parameters of a check type that are shell command lines (values substituted are quoted)."""
    return tuple(getattr(load_check(check_type), "SHELL_PARAMS", ()))


def _looks_untranslated(en: str, zh: str) -> bool:
    words = re.findall(r"[A-Za-z]{2,}", en)
    return en.strip() == zh.strip() and len(words) >= 3


# ---- building the model from a document that passed every check ----


def _text(value: dict[str, str] | None) -> Text | None:
    return Text(value["en"], value["zh"]) if value else None  # `fp` is lint's business


def _req_text(value: dict[str, str]) -> Text:
    return Text(value["en"], value["zh"])


def _build(data: dict[str, Any], file: str, digest: str) -> Runbook:
    steps = {sid: _build_step(sid, s) for sid, s in data["steps"].items()}
    conclusions = {cid: _build_conclusion(cid, c) for cid, c in data["conclusions"].items()}
    params = {
        name: Param(name, p["type"], bool(p.get("required", False)), p.get("default"),
                    Text(p["help"]["en"], p["help"]["zh"]))
        for name, p in (data.get("params") or {}).items()
    }
    return Runbook(
        id=data["id"], version=data["version"], title=_req_text(data["title"]),
        summary=_req_text(data["summary"]), tags=list(data.get("tags") or []),
        symptoms=[_req_text(s) for s in data.get("symptoms") or []],
        signatures=[_signature(s, data.get("conclusions") or {}) for s in data.get("signatures") or []],
        params=params, start=data["start"], steps=steps, conclusions=conclusions,
        changelog=[ChangelogEntry(c["version"], Text(c["en"], c["zh"]))
                   for c in data.get("changelog") or []],
        path=file, digest=digest,
    )


def _signature(s: dict[str, Any], conclusions: dict[str, Any]) -> Signature:
    goto = s.get("goto")
    conclusion = s.get("conclusion") or (goto if goto in conclusions else None)
    return Signature(s["pattern"], goto, conclusion, s.get("role", "cause"))


def _build_step(step_id: str, s: dict[str, Any]) -> Step:
    check = s["check"]
    timeout = parse_duration(check["timeout"]) if "timeout" in check else None
    return Step(
        id=step_id, title=_req_text(s["title"]),
        check=Check(check["type"], dict(check.get("with") or {}), timeout),
        branches=[Branch(b["when"], b["goto"], _text(b.get("note"))) for b in s.get("branches") or []],
        default=s.get("default"), description=_text(s.get("description")),
        analysis=_analysis(s.get("analysis")),
    )


def _analysis(value: Any) -> Analysis | None:
    if isinstance(value, str):
        return Analysis(value)
    if isinstance(value, dict):
        return Analysis(value["type"], dict(value.get("with") or {}))
    return None


def _verify(v: dict[str, Any] | None) -> Verify | None:
    if not v:
        return None
    check = v["check"]
    timeout = parse_duration(check["timeout"]) if "timeout" in check else None
    return Verify(Check(check["type"], dict(check.get("with") or {}), timeout), v["passes"])


def _build_conclusion(cid: str, c: dict[str, Any]) -> Conclusion:
    fixes = [Fix(_req_text(f["title"]), _text(f.get("body")), f.get("run"), f["effect"],
                 _verify(f.get("verify")))
             for f in c.get("fixes") or []]
    return Conclusion(cid, c["severity"], list(c["taxonomy"]), _req_text(c["title"]),
                      _req_text(c["explanation"]), fixes, list(c.get("see_also") or []),
                      _text(c.get("finding")), str(c.get("basis") or "node"), bool(c.get("generic")))


def _mapping(value: Any) -> dict[Any, Any]:
    return value if isinstance(value, dict) else {}
