"""`runbook run ID`: walk a runbook on nodes and report every node's conclusion."""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any


def run(args: argparse.Namespace) -> int:
    from runbook.cli.params import ParamError, parse_sets
    from runbook.cli.resolve import find_runbook
    from runbook.cli.targets import nodes_from_args, transports_from_args
    from runbook.library import load_library
    from runbook.nodes import NodeSpecError
    from runbook.report import get_reporter
    from runbook.report.build import build_report
    from runbook.report.text import is_tty
    from runbook.walk import Walk, WalkOptions

    library = load_library()
    runbook = find_runbook(args.id, library)
    if runbook is None:
        return 2
    if args.yes and not args.apply:
        print("runbook: --yes only makes sense with --apply", file=sys.stderr)
        return 2
    try:
        params = parse_sets(runbook, args.sets)
        nodes = nodes_from_args(args)
    except (ParamError, NodeSpecError, ValueError) as exc:
        print(f"runbook: {exc}", file=sys.stderr)
        return 2
    record_dir = Path(args.record) if args.record else None
    if record_dir is not None:
        from runbook.recording import RecordingError, prepare_dir

        try:  # refuse a bad DIR before a long run, not after it
            prepare_dir(record_dir)
        except RecordingError as exc:
            print(f"runbook: {exc}", file=sys.stderr)
            return 2
    progress = sys.stderr if is_tty(sys.stderr) else None
    reporter = get_reporter(args.format, lang=args.lang, progress=progress,
                            color=args.output is None and is_tty(sys.stdout))
    transport = transports_from_args(args)
    # Fixes and their verify checks use `transport` itself: they are never part of a recording.
    recorder = _recorder(transport) if record_dir is not None else None
    started = datetime.now(timezone.utc)
    clock = time.monotonic()
    def make_walk() -> Walk:
        if recorder is not None:
            recorder.clear()  # --watch: keep only the last round
        return Walk(library, runbook, nodes, recorder or transport, params,
                    WalkOptions(forks=args.forks, deadline_s=args.timeout), [reporter])

    try:
        if args.watch is not None:
            from runbook.watch import watch

            walk, outcomes, interrupted = watch(make_walk, args.watch, sys.stderr, args.watch_for)
        else:
            walk, interrupted = make_walk(), False
            try:
                outcomes = walk.run()
            except KeyboardInterrupt:
                outcomes, interrupted = walk.outcomes, True
        if interrupted:
            # The probes still running on nodes are stopped; report what was found so far.
            print("runbook: interrupted; stopping remote checks", file=sys.stderr)
        if record_dir is not None and recorder is not None:
            _write_recording(record_dir, runbook, outcomes, recorder, params, started)
        # An interrupted run never acts: its diagnosis is incomplete.
        fix_results, refused = act_on_fixes(args, walk, library, transport, dry_run=interrupted)
    finally:
        transport.close()
    report = build_report(runbook, outcomes, started.strftime("%Y-%m-%dT%H:%M:%SZ"),
                          time.monotonic() - clock, args.lang, params, fix_results)
    text = reporter.render(report)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        print(f"runbook: report written to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 2 if refused else int(report["summary"]["exit_code"])


def _recorder(transport: Any) -> Any:
    from runbook.recording import RecordingTransport

    return RecordingTransport(transport)


def _write_recording(directory: Path, runbook: Any, outcomes: Any, recorder: Any,
                     params: dict[str, Any], started: datetime) -> None:
    from runbook.recording import build_recording, write_recording

    doc = build_recording(runbook, outcomes, recorder.answers, params,
                          started.strftime("%Y-%m-%dT%H:%M:%SZ"))
    path = write_recording(directory, doc)
    print(f"runbook: recording written to {path} (replay: runbook test --replay {directory})",
          file=sys.stderr)


def act_on_fixes(args: argparse.Namespace, walk: Any, library: Any, transport: Any,
                 dry_run: bool = False) -> tuple[dict[Any, Any], bool]:
    """Plan the fixes (dry run by default), ask, run them. Returns what happened per (node, fix)
    and whether the run refused to act (the blast-radius cap)."""
    from runbook import fixes

    interactive = sys.stdin.isatty() and sys.stderr.isatty()
    policy = fixes.FixPolicy(apply=args.apply and not dry_run, yes=args.yes, interactive=interactive,
                             max_nodes=args.max_nodes, keep_going=args.keep_going,
                             audit_log=Path(args.audit_log) if args.audit_log else fixes.default_audit_log())
    planned = fixes.plan(walk.outcomes, policy, args.lang)
    if not policy.apply:
        return fixes.node_results(planned), False
    try:
        fixes.check_blast_radius(planned, policy)
    except fixes.FixRefused as exc:
        print(f"runbook: {exc}", file=sys.stderr)
        _mark_pending(planned, "refused", str(exc))
        return fixes.node_results(planned), True
    pending = fixes.confirmation_text(planned)
    if not pending:
        print("runbook: no fix to run (none with a command, or all held back)", file=sys.stderr)
        return fixes.node_results(planned), False
    if interactive and not args.yes:
        print(f"runbook: about to run these fixes:\n{pending}", file=sys.stderr)
        # The question goes to the terminal (stderr), never into the report on stdout.
        print("Run them? [y/N] ", end="", file=sys.stderr, flush=True)
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            _mark_pending(planned, "refused", "not confirmed")
            return fixes.node_results(planned), False
    fixes.execute(planned, transport, library, policy, forks=args.forks)
    print(f"runbook: executed fixes are recorded in {policy.audit_log}", file=sys.stderr)
    return fixes.node_results(planned), False


def _mark_pending(planned: list[Any], status: str, reason: str) -> None:
    for item in planned:
        if item.result["status"] == "pending":
            item.result = {"status": status, "reason": reason}
