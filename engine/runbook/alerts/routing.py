"""Which runbook an alert runs, where, with which parameters, and whether fixes may run.

The runbook is the first of: the `runbook_url` annotation when it points at a runbook page
of our site (`.../runbooks/ID/`, under the routing file's `site:` when it names one) or names
a runbook (`runbook:ID` or `ID`); a `runbook` annotation; a `runbook` label; the first route
of the routing file that matches. The nodes come from the alert's labels (hosts.py), or the
Slurm job of its `slurm_job_id` label.

The routing file (YAML, read through format/safeyaml.py):

    site: https://runbooks.example.com/          # optional
    routes:                                       # the first that matches wins
      - match: {alertname: TrainingLossNaN}       # label: value, or label: [value, ...]; all hold
        runbook: nan-loss                         # optional where the alert names its runbook
        params:                                   # runbook parameters (`--set`), each a value or
          log: {label: log_path}                  # taken from a label or an annotation,
          max_lr: {annotation: max_lr, default: 0.001}   # with a default
        fixes: read-only                          # optional: run the read-only fixes

A route that names no runbook gives its parameters to alerts that name theirs. Fixes that
change state never run from an alert: the loader refuses any `fixes:` but `read-only`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import yaml

from runbook.alerts.hosts import HostMap, host_of, slurm_job_of
from runbook.alerts.payload import Alert
from runbook.format import safeyaml

FIXES = ("none", "read-only")
_ID = re.compile(r"[a-z0-9][a-z0-9-]{0,99}")
_PAGE = re.compile(r"/runbooks/([a-z0-9][a-z0-9-]{0,99})(?:/(?:index\.html)?|\.html)?")
_ROUTE_KEYS = {"match", "runbook", "params", "fixes"}


class RoutingError(ValueError):
    """The routing file cannot be used; one line naming the file and the key."""


class Unmapped(NamedTuple):
    """An alert that starts no run, and why (logged; the alert is still answered)."""

    reason: str


@dataclass(frozen=True)
class RunRequest:
    """What one alert runs: `runbook run RUNBOOK --nodes NODES --set ...`."""

    runbook: str
    nodes: list[str]
    slurm_job: str | None
    params: dict[str, str]
    fixes: str = "none"

    def to_json(self) -> dict[str, Any]:
        return {"runbook": self.runbook, "nodes": self.nodes, "slurm_job": self.slurm_job,
                "params": self.params, "fixes": self.fixes}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunRequest:
        fixes = data.get("fixes") if data.get("fixes") in FIXES else "none"
        return cls(str(data["runbook"]), [str(n) for n in data.get("nodes") or []],
                   data.get("slurm_job"), {str(k): str(v) for k, v in (data.get("params") or {}).items()},
                   str(fixes))


@dataclass(frozen=True)
class Route:
    match: dict[str, tuple[str, ...]]
    runbook: str | None
    params: dict[str, Any]
    fixes: str

    def matches(self, labels: dict[str, str]) -> bool:
        return all(labels.get(name) in allowed for name, allowed in self.match.items())


@dataclass
class Router:
    known: set[str]  # the runbook ids of the library
    routes: list[Route] = field(default_factory=list)
    site: str | None = None
    hosts: HostMap = field(default_factory=HostMap)

    def route(self, alert: Alert) -> RunRequest | Unmapped:
        named = self.runbook_named_by(alert)
        if named is not None and named not in self.known:
            return Unmapped(f"the alert names runbook {named!r}, which the library does not have")
        chosen = next((r for r in self.routes if r.matches(alert.labels)
                       and (r.runbook in (None, named) if named else r.runbook is not None)), None)
        runbook = named or (chosen.runbook if chosen else None)
        if runbook is None:
            return Unmapped("no runbook_url or runbook annotation or label names a runbook, "
                            "and no route matches")
        slurm_job = slurm_job_of(alert.labels)
        host = host_of(alert.labels)
        if slurm_job is None and host is None:
            return Unmapped("no label names a node (node, hostname, Hostname, nodename, instance) "
                            "or a Slurm job (slurm_job_id)")
        return RunRequest(runbook, [self.hosts.node_name(host)] if host and not slurm_job else [],
                          slurm_job, _params(chosen, alert), chosen.fixes if chosen else "none")

    def runbook_named_by(self, alert: Alert) -> str | None:
        url = alert.annotations.get("runbook_url", "").strip()
        named = self._from_url(url) if url else None
        for value in (named, alert.annotations.get("runbook"), alert.labels.get("runbook")):
            if value and _ID.fullmatch(value.strip()):
                return value.strip()
        return None

    def _from_url(self, url: str) -> str | None:
        if url.startswith("runbook:"):
            return url.removeprefix("runbook:")
        if _ID.fullmatch(url):
            return url
        if self.site and not url.startswith(self.site):
            return None  # a page of another site: not ours to read
        found = _PAGE.search(urlsplit(url).path)
        return found.group(1) if found and found.group(1) in self.known else None


def _params(route: Route | None, alert: Alert) -> dict[str, str]:
    """The route's parameters for this alert; one a label or annotation does not give and that
    has no default is left out (the runbook's own default, or the run's one-line error)."""
    values: dict[str, str] = {}
    for name, spec in (route.params if route else {}).items():
        if not isinstance(spec, dict):
            values[name] = _text(spec)
            continue
        source = alert.labels if "label" in spec else alert.annotations
        found = source.get(str(spec.get("label") or spec.get("annotation")))
        if found is not None:
            values[name] = found
        elif spec.get("default") is not None:
            values[name] = _text(spec["default"])
    return values


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# -- the routing file ---------------------------------------------------------------------


def load_router(path: Path | None, known: set[str], hosts: HostMap | None = None) -> Router:
    """The router of a routing file (None: routes only from the alerts' own annotations)."""
    router = Router(known, hosts=hosts or HostMap())
    if path is None:
        return router
    data = _read(path)
    site = data.get("site")
    if site is not None and not (isinstance(site, str) and site.startswith(("http://", "https://"))):
        raise RoutingError(f"{path}: site: expected the site's URL (http:// or https://)")
    router.site = site
    routes = data.get("routes") or []
    if not isinstance(routes, list):
        raise RoutingError(f"{path}: routes: expected a list")
    router.routes = [_route(path, f"routes[{i}]", r, known) for i, r in enumerate(routes)]
    return router


def _read(path: Path) -> dict[str, Any]:
    try:
        data = safeyaml.load(safeyaml.read_text(path)[0])
    except OSError as exc:
        raise RoutingError(f"{path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        why = exc.message if isinstance(exc, safeyaml.LimitError) else "YAML syntax error"
        raise RoutingError(f"{path}{where}: {why}") from None
    if not isinstance(data, dict) or set(data) - {"site", "routes"}:
        raise RoutingError(f"{path}: expected a mapping with `site` and `routes`")
    return data


def _route(path: Path, where: str, data: Any, known: set[str]) -> Route:
    def fail(why: str) -> RoutingError:
        return RoutingError(f"{path}: {where}{why}")

    if not isinstance(data, dict) or set(data) - _ROUTE_KEYS:
        raise fail(f": expected a mapping of {', '.join(sorted(_ROUTE_KEYS))}")
    runbook = data.get("runbook")
    if runbook is not None and runbook not in known:
        raise fail(f".runbook: no runbook named {runbook!r} in the library")
    fixes = data.get("fixes", "none")
    if fixes not in FIXES:
        raise fail(f".fixes: {fixes!r}: an alert's run may apply read-only fixes at most "
                   "(changes-state and disruptive ones need a person: runbook run --apply)")
    match = data.get("match") or {}
    if not isinstance(match, dict) or not match:
        raise fail(".match: expected label: value pairs")
    params = data.get("params") or {}
    if not isinstance(params, dict):
        raise fail(".params: expected name: value pairs")
    for name, spec in params.items():
        if isinstance(spec, dict) and (len({"label", "annotation"} & set(spec)) != 1
                                       or set(spec) - {"label", "annotation", "default"}):
            raise fail(f".params.{name}: expected a value, or label: NAME or annotation: NAME "
                       "with an optional default")
    return Route({str(k): _allowed(v) for k, v in match.items()}, runbook, params, fixes)


def _allowed(value: Any) -> tuple[str, ...]:
    return tuple(_text(v) for v in value) if isinstance(value, list) else (_text(value),)
