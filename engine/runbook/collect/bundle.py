"""Seed 004's diagnosis bundle, from every node at once, under timeouts (`runbook collect`, and
the MCP server's `collect` tool).

Nodes run in parallel (up to `forks`); each node's sections (collect/sections.py) run in turn
through its transport, each under its own time limit and all under the whole-run timeout.
Whatever a node yields is kept when another node fails. Every file is redacted before it is
written (run/redact.py); collect/archive.py writes the index and the reproducible .tar.gz.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from runbook.collect.archive import (
    FAILED,
    FAILURES,
    TIMEOUT,
    UNREACHABLE,
    NodeEntry,
    SectionEntry,
    write_archive,
)
from runbook.collect.sections import SECTIONS, NodeJob, SectionOutcome, collect_node, render
from runbook.format.problems import did_you_mean
from runbook.run.redact import Redactor
from runbook.transports import Node, Transport

PARAMS = ("log", "config", "pid", "match")
WAIT_GRACE_S = 3.0  # past the deadline (and an SSH connect), before unfinished nodes are given up
Outcomes = dict[str, dict[str, SectionOutcome]]  # node -> section -> outcome


class BundleError(ValueError):
    """A request that cannot make a bundle; the message says which value to fix."""


@dataclass
class Request:
    """What to collect, checked: the parameters, the redaction, where the bundle goes, and a
    `runbook run` report to put in it."""

    params: dict[str, Any]
    redactor: Redactor
    output: Path
    report: Any | None  # the parsed --report


@dataclass
class Limits:
    """How long, and how many nodes at once."""

    timeout: float = 300.0  # the whole collection
    section_timeout: float | None = None  # each section (default: its own)
    forks: int = 256
    connect_timeout: float = 10.0
    python: str | None = None  # the Python of the probe and of the Python sections


@dataclass
class Bundle:
    """What was written: every node's entry, the file, its size and member count, how long it took,
    and why it stopped early, if it did."""

    entries: list[NodeEntry]
    output: Path
    size: int
    files: int
    elapsed_s: float
    incomplete: str | None = None

    @property
    def failed(self) -> bool:
        return any(s.status in FAILURES for e in self.entries for s in e.sections)


# -- the request ---------------------------------------------------------------------------------


def make_request(sets: list[str], output: str, report: str | None = None,
                 redact: list[str] | None = None) -> Request:
    """Raises BundleError for a bad NAME=VALUE, a folder that does not exist, a report that is not
    JSON, or a bad --redact regex."""
    path = Path(output)
    if not path.parent.is_dir():
        raise BundleError(f"-o {output}: the folder {path.parent} does not exist")
    params = parse_sets(sets)
    try:
        redactor = Redactor(redact or [])
    except ValueError as exc:  # already one line naming the pattern
        raise BundleError(str(exc)) from None
    return Request(params, redactor, path, read_report(report))


def check_limits(limits: Limits) -> None:
    if limits.timeout <= 0 or (limits.section_timeout is not None and limits.section_timeout <= 0):
        raise BundleError("--timeout and --section-timeout must be positive")
    if limits.forks < 1:
        raise BundleError("--forks must be at least 1")


def parse_sets(items: list[str]) -> dict[str, Any]:
    """--set NAME=VALUE for log, config (repeatable, comma-separated), pid, match."""
    params: dict[str, Any] = {}
    for item in items:
        name, sep, raw = item.partition("=")
        if not sep:
            raise BundleError(f"--set {item!r}: expected NAME=VALUE")
        if name not in PARAMS:
            raise BundleError(f"--set {name}: collect has no parameter {name!r}{did_you_mean(name, PARAMS)} "
                              f"(its parameters: {', '.join(PARAMS)})")
        if name == "config":
            params.setdefault("config", []).extend(_path(p) for p in raw.split(",") if p.strip())
        else:
            params[name] = _param(name, raw)
    return params


def _param(name: str, raw: str) -> Any:
    if name == "log":
        return _path(raw) if raw else raw
    if name == "pid":
        if not raw.strip().isdigit():
            raise BundleError(f"--set pid={raw}: expected a process id (a positive integer)")
        return int(raw)
    try:
        re.compile(raw)
    except re.error as exc:
        raise BundleError(f"--set match={raw}: not a valid regular expression: {exc}") from None
    return raw


def _path(raw: str) -> str:
    """As `runbook run` reads a path parameter: ~ expanded, relative to the current folder."""
    return os.path.abspath(os.path.expanduser(raw.strip()))


def read_report(path: str | None) -> Any | None:
    if path is None:
        return None
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise BundleError(f"--report {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise BundleError(f"--report {path}: not a JSON report (runbook run --format json): {exc}") from None


def node_params(params: dict[str, Any], node: Node) -> dict[str, Any]:
    """--set values, overridden by the node's own `params` in the inventory (as in `run`)."""
    own = {k: v for k, v in (node.vars.get("params") or {}).items() if k in PARAMS}
    if isinstance(own.get("config"), str):
        own["config"] = [own["config"]]
    return {**params, **own}


# -- collecting ----------------------------------------------------------------------------------


def write_bundle(nodes: list[Node], transport: Transport, request: Request, limits: Limits,
                 stop_reason: Callable[[], str] = lambda: "interrupted",
                 on_node_done: Callable[[str], None] | None = None) -> Bundle:
    """Collect every node, then write the bundle (also when Ctrl-C stopped the collecting: it
    says so, and `stop_reason()` says why)."""
    started = datetime.now(timezone.utc)
    clock = time.monotonic()
    outcomes, interrupted = collect(nodes, transport, request.params, limits, stop_reason, on_node_done)
    incomplete = stop_reason() if interrupted else None
    entries, members = assemble(nodes, outcomes, request)
    meta = {"collected_at": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "duration_s": round(time.monotonic() - clock, 3), "params": request.params,
            "timeout_s": limits.timeout, "report": "report.json" if request.report is not None else None}
    members.update(index_members(entries, meta, request, incomplete))
    size = write_archive(request.output, members)
    return Bundle(entries, request.output, size, len(members), time.monotonic() - clock, incomplete)


def collect(nodes: list[Node], transport: Transport, params: dict[str, Any], limits: Limits,
            stop_reason: Callable[[], str] = lambda: "interrupted",
            on_node_done: Callable[[str], None] | None = None) -> tuple[Outcomes, bool]:
    """Every node's outcomes (what finished by the deadline), and whether Ctrl-C stopped it."""
    deadline = time.monotonic() + limits.timeout
    outcomes: Outcomes = {node.name: {} for node in nodes}

    def one(node: Node) -> None:
        job = NodeJob(node, transport, node_params(params, node), deadline,
                      python=str(node.vars.get("python") or limits.python or "") or None,
                      section_timeout=limits.section_timeout)
        collect_node(job, SECTIONS, lambda section, outcome: outcomes[node.name].__setitem__(
            section.name, outcome))
        if on_node_done is not None:
            on_node_done(node.name)

    interrupted = False
    try:
        errors = in_parallel(nodes, one, limits.forks, limits.timeout + limits.connect_timeout + WAIT_GRACE_S)
    except KeyboardInterrupt:
        interrupted, errors = True, {}
    snapshot = {name: dict(found) for name, found in outcomes.items()}
    for name, exc in errors.items():
        _fill(snapshot[name], FAILED, f"internal error: {type(exc).__name__}: {exc}")
    transport.close()  # stops the probes still running on nodes
    for found in snapshot.values():
        _fill(found, FAILED if interrupted else TIMEOUT,
              stop_reason() if interrupted else "not finished within the whole-run --timeout")
    return snapshot, interrupted


def in_parallel(nodes: list[Node], work: Callable[[Node], None], forks: int,
                timeout: float) -> dict[str, BaseException]:
    """work(node) for every node, `forks` at a time; waits at most `timeout` s for all of them.

    Daemon threads, not a ThreadPoolExecutor: its threads are joined at exit, so a Ctrl-C or a
    node stuck past the deadline would keep the command waiting for checks nobody needs any more.
    Returns the exceptions that escaped `work` (bugs), by node name.
    """
    pending = list(reversed(nodes))
    errors: dict[str, BaseException] = {}
    lock = threading.Lock()
    finished = threading.Semaphore(0)

    def worker() -> None:
        while True:
            with lock:
                if not pending:
                    return
                node = pending.pop()
            try:
                work(node)
            except Exception as exc:  # one node's bug must not lose the other nodes
                errors[node.name] = exc
            finished.release()

    for _ in range(max(1, min(forks, len(nodes)))):
        threading.Thread(target=worker, name="collect", daemon=True).start()
    end = time.monotonic() + timeout
    for _ in nodes:
        if not finished.acquire(timeout=max(0.0, end - time.monotonic())):
            break
    return dict(errors)


def _fill(found: dict[str, SectionOutcome], status: str, reason: str) -> None:
    for section in SECTIONS:
        found.setdefault(section.name, SectionOutcome(status, reason=reason))


# -- the bundle ----------------------------------------------------------------------------------


def assemble(nodes: list[Node], outcomes: Outcomes,
             request: Request) -> tuple[list[NodeEntry], dict[str, bytes]]:
    """The index entries and the redacted section files of every node."""
    from runbook.collect.archive import node_dir

    redact = request.redactor.text
    entries: list[NodeEntry] = []
    members: dict[str, bytes] = {}
    for node in nodes:
        sections = []
        for section in SECTIONS:
            outcome = outcomes[node.name][section.name]
            name = f"{node_dir(node.name)}/{section.file}"
            members[name] = redact(render(node.name, section, outcome)).encode("utf-8")
            sections.append(SectionEntry(section.name, name, outcome.status,
                                         redact(outcome.reason) if outcome.reason else None,
                                         redact(outcome.source), len(members[name]), outcome.duration_s))
        entries.append(_node_entry(node.name, sections))
    return entries, members


def _node_entry(name: str, sections: list[SectionEntry]) -> NodeEntry:
    lost = [s for s in sections if s.status == UNREACHABLE]
    if lost and len(lost) == len(sections):
        return NodeEntry(name, UNREACHABLE, lost[0].reason, sections)
    failed = any(s.status in FAILURES for s in sections)
    return NodeEntry(name, "partial" if failed else "complete", lost[0].reason if lost else None, sections)


def index_members(entries: list[NodeEntry], meta: dict[str, Any], request: Request,
                  incomplete: str | None = None) -> dict[str, bytes]:
    """INDEX.md, index.json and report.json (when given), redacted like every other file;
    `incomplete` is why the collection stopped early (Ctrl-C), said at the top of both."""
    from runbook import __version__
    from runbook.collect.archive import index_json, index_markdown, json_bytes

    redactor = request.redactor
    header = [
        f"Made by `runbook collect` (runbook {__version__}) from {len(entries)} node(s): one folder "
        "per node, one file per section. A section that could not be collected says why, here and "
        "at the top of its file. The collection time and durations are in index.json.",
        "",
        "Status: **collected**; **absent**: nothing to collect (no GPU, Ray not running, no log "
        "given...); **timeout**, **denied** (permission), **failed**, **unreachable**: could not be "
        "collected. Secrets are redacted in every file (***redacted***).",
    ]
    if request.report is not None:
        header += ["", "`report.json`: the `runbook run` report given with --report."]
    members = {"INDEX.md": redactor.text(index_markdown(entries, header, incomplete)).encode("utf-8"),
               "index.json": json_bytes(redactor.data(index_json(entries, meta, incomplete)))}
    if request.report is not None:
        members["report.json"] = json_bytes(redactor.data(request.report))
    return members


def summary(bundle: Bundle) -> str:
    """What `runbook collect` prints: each node's sections by status, what failed and why, the file."""
    lines = []
    for entry in bundle.entries:
        if entry.status == UNREACHABLE:
            lines.append(f"{entry.node}: unreachable: {entry.reason}")
            continue
        counts: dict[str, int] = {}
        for s in entry.sections:
            counts[s.status] = counts.get(s.status, 0) + 1
        lines.append(f"{entry.node}: " + ", ".join(f"{n} {status}" for status, n in sorted(counts.items())))
        lines += [f"  {s.section}: {s.status}: {s.reason}" for s in entry.sections if s.status in FAILURES]
    lines.append(f"runbook: bundle written to {bundle.output} ({bundle.size / 1024:.1f} KiB, {bundle.files} "
                 f"files) in {bundle.elapsed_s:.1f} s")
    return "\n".join(lines) + "\n"
