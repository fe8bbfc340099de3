"""`runbook collect`: seed 004's diagnosis bundle, from every node at once, under timeouts.

Nodes run in parallel (up to --forks); each node's sections (collect/sections.py) run in turn
through its transport, each under its own time limit and all under the whole-run --timeout.
Whatever a node yields is kept when another node fails. Every file is redacted before it is
written (run/redact.py); collect/archive.py writes the index and the reproducible .tar.gz.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from runbook.cli.interrupts import interrupt_reason
from runbook.collect.archive import FAILED, FAILURES, TIMEOUT, UNREACHABLE, NodeEntry, SectionEntry
from runbook.collect.sections import SECTIONS, NodeJob, SectionOutcome, collect_node, render
from runbook.run.redact import Redactor
from runbook.transports import Node

PARAMS = ("log", "config", "pid", "match")
WAIT_GRACE_S = 3.0  # past the deadline (and an SSH connect), before unfinished nodes are given up
Outcomes = dict[str, dict[str, SectionOutcome]]  # node -> section -> outcome


class UsageError(ValueError):
    pass


@dataclass
class Request:
    """What the command line asks for, checked."""

    params: dict[str, Any]
    redactor: Redactor
    output: Path
    report: Any | None  # the parsed --report


def run(args: argparse.Namespace) -> int:
    from runbook.run.nodes import NodeSpecError
    from runbook.run.targets import nodes_from_args, transports_from_args

    try:
        request = parse_request(args)
        nodes = nodes_from_args(args)
    except (UsageError, NodeSpecError, ValueError) as exc:
        print(f"runbook collect: {exc}", file=sys.stderr)
        return 2
    _default_log_from_job(args, request.params)
    started = datetime.now(timezone.utc)
    clock = time.monotonic()
    outcomes, interrupted = collect(nodes, transports_from_args(args), request.params, args)
    incomplete = interrupt_reason() if interrupted else None
    entries, members = assemble(nodes, outcomes, request)
    meta = {"collected_at": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "duration_s": round(time.monotonic() - clock, 3), "params": request.params,
            "timeout_s": args.timeout, "report": "report.json" if request.report is not None else None}
    members.update(index_members(entries, meta, request, incomplete))
    from runbook.collect.archive import write_archive

    size = write_archive(request.output, members)
    sys.stdout.write(summary(entries, request.output, size, len(members), time.monotonic() - clock))
    if incomplete:
        print(f"runbook collect: {incomplete}; the bundle holds what was collected and says it is "
              "incomplete", file=sys.stderr)
        return 130
    return 3 if any(s.status in FAILURES for e in entries for s in e.sections) else 0


# -- the command line ----------------------------------------------------------------------------


def _default_log_from_job(args: argparse.Namespace, params: dict[str, Any]) -> None:
    """With --slurm-job, the job's StdOut is the `log` unless --set gave one (as in `run`)."""
    from runbook.run.targets import job_log

    log = job_log(args)
    if log and "log" not in params:
        params["log"] = log


def parse_request(args: argparse.Namespace) -> Request:
    if args.timeout <= 0 or (args.section_timeout is not None and args.section_timeout <= 0):
        raise UsageError("--timeout and --section-timeout must be positive")
    if args.forks < 1:
        raise UsageError("--forks must be at least 1")
    output = Path(args.output)
    if not output.parent.is_dir():
        raise UsageError(f"-o {args.output}: the folder {output.parent} does not exist")
    return Request(parse_sets(args.sets), Redactor(args.redact), output, read_report(args.report))


def parse_sets(items: list[str]) -> dict[str, Any]:
    """--set NAME=VALUE for log, config (repeatable, comma-separated), pid, match."""
    from runbook.format.problems import did_you_mean

    params: dict[str, Any] = {}
    for item in items:
        name, sep, raw = item.partition("=")
        if not sep:
            raise UsageError(f"--set {item!r}: expected NAME=VALUE")
        if name not in PARAMS:
            raise UsageError(f"--set {name}: collect has no parameter {name!r}{did_you_mean(name, PARAMS)} "
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
            raise UsageError(f"--set pid={raw}: expected a process id (a positive integer)")
        return int(raw)
    import re

    try:
        re.compile(raw)
    except re.error as exc:
        raise UsageError(f"--set match={raw}: not a valid regular expression: {exc}") from None
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
        raise UsageError(f"--report {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UsageError(f"--report {path}: not a JSON report (runbook run --format json): {exc}") from None


def node_params(params: dict[str, Any], node: Node) -> dict[str, Any]:
    """--set values, overridden by the node's own `params` in the inventory (as in `run`)."""
    own = {k: v for k, v in (node.vars.get("params") or {}).items() if k in PARAMS}
    if isinstance(own.get("config"), str):
        own["config"] = [own["config"]]
    return {**params, **own}


# -- collecting ----------------------------------------------------------------------------------


def collect(nodes: list[Node], transport: Any, params: dict[str, Any],
            args: argparse.Namespace) -> tuple[Outcomes, bool]:
    """Every node's outcomes (what finished by the deadline), and whether Ctrl-C stopped it."""
    deadline = time.monotonic() + args.timeout
    outcomes: Outcomes = {node.name: {} for node in nodes}

    def one(node: Node) -> None:
        job = NodeJob(node, transport, node_params(params, node), deadline,
                      python=str(node.vars.get("python") or args.python or "") or None,
                      section_timeout=args.section_timeout)
        collect_node(job, SECTIONS, lambda section, outcome: outcomes[node.name].__setitem__(
            section.name, outcome))

    interrupted = False
    try:
        errors = in_parallel(nodes, one, args.forks, args.timeout + args.connect_timeout + WAIT_GRACE_S)
    except KeyboardInterrupt:
        interrupted, errors = True, {}
    snapshot = {name: dict(found) for name, found in outcomes.items()}
    for name, exc in errors.items():
        _fill(snapshot[name], FAILED, f"internal error: {type(exc).__name__}: {exc}")
    transport.close()  # stops the probes still running on nodes
    for found in snapshot.values():
        _fill(found, FAILED if interrupted else TIMEOUT,
              interrupt_reason() if interrupted else "not finished within the whole-run --timeout")
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


def summary(entries: list[NodeEntry], output: Path, size: int, files: int, elapsed: float) -> str:
    lines = []
    for entry in entries:
        if entry.status == UNREACHABLE:
            lines.append(f"{entry.node}: unreachable: {entry.reason}")
            continue
        counts: dict[str, int] = {}
        for s in entry.sections:
            counts[s.status] = counts.get(s.status, 0) + 1
        lines.append(f"{entry.node}: " + ", ".join(f"{n} {status}" for status, n in sorted(counts.items())))
        lines += [f"  {s.section}: {s.status}: {s.reason}" for s in entry.sections if s.status in FAILURES]
    lines.append(f"runbook: bundle written to {output} ({size / 1024:.1f} KiB, {files} files) "
                 f"in {elapsed:.1f} s")
    return "\n".join(lines) + "\n"
