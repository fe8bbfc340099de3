"""`runbook run ID`: walk a runbook on nodes and report every node's conclusion."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from runbook.cli.interrupts import interrupt_reason


class UsageError(Exception):
    """A bad argument found before any node is touched: printed as one line, exit 2."""


@dataclass
class Plan:
    """What `run` resolved from its arguments before touching a node."""

    library: Any
    runbook: Any
    params: dict[str, Any]
    nodes: list[Any]
    record_dir: Path | None


@dataclass
class Walked:
    """What walking the nodes gave: the walk, every node's outcome, and what the fixes did."""

    walk: Any
    outcomes: Any
    fix_results: dict[Any, Any]
    refused: bool
    interrupted: bool = False


@dataclass
class Diagnosis:
    """What one run found: its report, whether the fixes were refused (the blast-radius cap)
    and whether Ctrl-C or SIGTERM cut it short."""

    report: dict[str, Any]
    refused: bool
    interrupted: bool


def run(args: argparse.Namespace) -> int:
    from runbook.report import get_reporter
    from runbook.report.text import is_tty
    from runbook.run.targets import JobNotRunning

    progress = sys.stderr if is_tty(sys.stderr) else None
    reporter = get_reporter(args.format, lang=args.lang, progress=progress,
                            color=args.output is None and is_tty(sys.stdout))
    streams = getattr(reporter, "streams", False)
    if streams:
        if args.watch is not None:
            print("runbook: --format jsonl streams one walk and --watch walks again until something "
                  "changes: use --format json with --watch", file=sys.stderr)
            return 2
        # A --record reads every node's evidence after the walk: keep it then.
        reporter.stream_to(args.output, slim=args.record is None)
    try:
        diagnosis = diagnose(args, reporter)
    except JobNotRunning as stopped:
        from runbook.cli.run.slurm_ended import explain_ended_job

        return explain_ended_job(stopped.job, args)
    except UsageError as exc:
        if str(exc):
            print(f"runbook: {exc}", file=sys.stderr)
        return 2
    text = reporter.render(diagnosis.report)
    if not streams:  # a streaming reporter has written its lines itself, the summary last
        _emit(text, args.output)
    if diagnosis.interrupted:
        print(f"runbook: {diagnosis.report['summary']['reason']}: the report is incomplete", file=sys.stderr)
        return 130
    return 2 if diagnosis.refused else int(diagnosis.report["summary"]["exit_code"])


def diagnose(args: argparse.Namespace, reporter: Any, policy: Any = None) -> Diagnosis:
    """`runbook run`'s work without its output: plan, walk every node (`reporter` listens),
    act on the fixes as `policy` (a run.fixes.FixPolicy; by default the one the arguments
    give) allows, build the report. Raises UsageError, or JobNotRunning. The alert receiver
    runs its diagnoses through here too."""
    from runbook.report.build import build_report

    plan = _plan(args)
    started = datetime.now(timezone.utc)
    clock = time.monotonic()
    start = getattr(reporter, "start", None)
    if start is not None:  # a streaming reporter writes its header before the first node finishes
        start(plan.runbook, plan.params, started.strftime("%Y-%m-%dT%H:%M:%SZ"))
    walked = _walk(args, plan, reporter, started, policy)
    incomplete = interrupt_reason() if walked.interrupted else None
    report = build_report(plan.runbook, walked.outcomes, started.strftime("%Y-%m-%dT%H:%M:%SZ"),
                          time.monotonic() - clock, args.lang, plan.params, walked.fix_results,
                          incomplete=incomplete, job_verdicts=getattr(walked.walk, "job_verdicts", None))
    return Diagnosis(report, walked.refused, walked.interrupted)


def _plan(args: argparse.Namespace) -> Plan:
    """The runbook, its parameters and the nodes. Raises UsageError (an empty one when the
    runbook's lookup already said why)."""
    from runbook.cli.resolve import find_runbook
    from runbook.library.lazy import open_library
    from runbook.run.nodes import NodeSpecError
    from runbook.run.params import ParamError, parse_sets
    from runbook.run.targets import JobNotRunning, default_log, nodes_from_args

    library = open_library()  # loads only the runbooks the walk reaches
    runbook = find_runbook(args.id, library)
    if runbook is None:
        raise UsageError("")
    if args.yes and not args.apply:
        raise UsageError("--yes only makes sense with --apply")
    try:
        params = parse_sets(runbook, args.sets)
        nodes = nodes_from_args(args)
    except JobNotRunning:
        raise
    except (ParamError, NodeSpecError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    default_log(args, params, runbook.params)
    record_dir = Path(args.record) if args.record else None
    if record_dir is not None:
        from runbook.run.recording import RecordingError, prepare_dir

        try:  # refuse a bad DIR before a long run, not after it
            prepare_dir(record_dir)
        except RecordingError as exc:
            raise UsageError(str(exc)) from None
    return Plan(library, runbook, params, nodes, record_dir)


def _walk(args: argparse.Namespace, plan: Plan, reporter: Any, started: datetime,
          policy: Any = None) -> Walked:
    """Walk every node (once, or until something changes with --watch), record, act on fixes."""
    from runbook.run.targets import transports_from_args
    from runbook.run.walk import Walk, WalkOptions

    transport = transports_from_args(args)
    # Fixes and their verify checks use `transport` itself: they are never part of a recording.
    recorder = _recorder(transport) if plan.record_dir is not None else None

    def make_walk() -> Walk:
        if recorder is not None:
            recorder.clear()  # --watch: keep only the last round
        return Walk(plan.library, plan.runbook, plan.nodes, recorder or transport, plan.params,
                    WalkOptions(forks=args.forks, deadline_s=args.timeout), [reporter])

    try:
        walk, outcomes, interrupted = _walk_once_or_watch(args, make_walk)
        # What was recorded until now: the answers of the checks that close() cuts short are not.
        answers = {node: list(got) for node, got in list(recorder.answers.items())} if recorder else {}
        if interrupted:
            # Stop the probes still running on nodes first; then report what was found so far.
            print("runbook: interrupted; stopping remote checks", file=sys.stderr)
            transport.close()
        if plan.record_dir is not None:
            _write_recording(plan.record_dir, plan.runbook, outcomes, answers, plan.params, started)
        # An interrupted run never acts: its diagnosis is incomplete.
        fix_results, refused, stopped = act_on_fixes(args, walk, plan.library, transport,
                                                     dry_run=interrupted, params=plan.params,
                                                     policy=policy)
    finally:
        transport.close()
    return Walked(walk, outcomes, fix_results, refused, interrupted or stopped)


def _walk_once_or_watch(args: argparse.Namespace, make_walk: Callable[[], Any]) -> tuple[Any, Any, bool]:
    """(the last walk, its outcomes, whether Ctrl-C stopped it)."""
    if args.watch is not None:
        from runbook.run.watch import watch

        return watch(make_walk, args.watch, sys.stderr, args.watch_for)
    walk = make_walk()
    try:
        return walk, walk.run(), False
    except KeyboardInterrupt:
        return walk, walk.outcomes, True


def _emit(text: str, output: str | None) -> None:
    if output:
        Path(output).write_text(text, encoding="utf-8")
        print(f"runbook: report written to {output}", file=sys.stderr)
    else:
        sys.stdout.write(text)


def _recorder(transport: Any) -> Any:
    from runbook.run.recording import RecordingTransport

    return RecordingTransport(transport)


def _write_recording(directory: Path, runbook: Any, outcomes: Any, answers: dict[str, Any],
                     params: dict[str, Any], started: datetime) -> None:
    from runbook.run.recording import build_recording, write_recording

    doc = build_recording(runbook, outcomes, answers, params,
                          started.strftime("%Y-%m-%dT%H:%M:%SZ"))
    path = write_recording(directory, doc)
    print(f"runbook: recording written to {path} (replay: runbook test --replay {directory})",
          file=sys.stderr)


def fix_policy(args: argparse.Namespace, params: dict[str, Any] | None) -> Any:
    """What `runbook run`'s arguments allow the fixes to do (--apply, --yes, --max-nodes...)."""
    from runbook.run import fixes
    from runbook.run.audit import default_audit_log
    from runbook.run.redact import Redactor

    return fixes.FixPolicy(apply=args.apply, yes=args.yes,
                           interactive=sys.stdin.isatty() and sys.stderr.isatty(),
                           max_nodes=args.max_nodes, keep_going=args.keep_going,
                           audit_log=Path(args.audit_log) if args.audit_log else default_audit_log(),
                           redactor=Redactor.for_params(params or {}))


def act_on_fixes(args: argparse.Namespace, walk: Any, library: Any, transport: Any,
                 dry_run: bool = False, params: dict[str, Any] | None = None, policy: Any = None,
                 ) -> tuple[dict[Any, Any], bool, bool]:
    """Plan the fixes (dry run by default), ask, run them. Returns what happened per (node, fix),
    whether the run refused to act (the blast-radius cap) and whether Ctrl-C stopped it."""
    import dataclasses

    from runbook.run import fixes

    policy = policy or fix_policy(args, params)
    if dry_run:
        policy = dataclasses.replace(policy, apply=False)
    planned = fixes.plan(walk.outcomes, policy, args.lang)
    if not policy.apply:
        return fixes.node_results(planned), False, False
    try:
        fixes.check_blast_radius(planned, policy)
    except fixes.FixRefused as exc:
        print(f"runbook: {exc}", file=sys.stderr)
        fixes.mark_pending(planned, "refused", str(exc))
        return fixes.node_results(planned), True, False
    pending = fixes.confirmation_text(planned)
    if not pending:
        print("runbook: no fix to run (none with a command, or all held back)", file=sys.stderr)
        return fixes.node_results(planned), False, False
    if policy.interactive and not policy.yes:
        print(f"runbook: about to run these fixes:\n{pending}", file=sys.stderr)
        # The question goes to the terminal (stderr), never into the report on stdout.
        print("Run them? [y/N] ", end="", file=sys.stderr, flush=True)
        try:
            answer = sys.stdin.readline()
        except KeyboardInterrupt:
            fixes.mark_pending(planned, "refused", "not confirmed (interrupted)")
            return fixes.node_results(planned), False, True
        if answer.strip().lower() not in ("y", "yes"):
            fixes.mark_pending(planned, "refused", "not confirmed")
            return fixes.node_results(planned), False, False
    try:
        fixes.execute(planned, transport, library, policy, forks=args.forks)
    except KeyboardInterrupt:  # the fixes not yet run never will; the report says which ran
        fixes.mark_pending(planned, "skipped", "interrupted before it finished")
        return fixes.node_results(planned), False, True
    print(f"runbook: executed fixes are recorded in {policy.audit_log}", file=sys.stderr)
    return fixes.node_results(planned), False, False
