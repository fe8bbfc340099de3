"""An alert's run as `runbook run` would do it: the same parser's defaults, the receiver's
options for reaching nodes, and that command's own `diagnose` (nothing here walks or reports)."""

from __future__ import annotations

import argparse
from typing import Any

# The options of `alerts serve` that mean the same for each run as for `runbook run`.
SHARED = ("inventory", "group", "executor", "ray_address", "python", "connect_timeout",
          "accept_new_host_keys", "forks", "lang", "timeout", "audit_log", "gateways", "gateway_fanout")


def run_args(serve: argparse.Namespace, request: Any) -> argparse.Namespace:
    """The arguments of `runbook run RUNBOOK --nodes ... --set ... --format json` for `request`."""
    from runbook.cli.run.args import add_arguments

    parser = argparse.ArgumentParser(prog="runbook run")
    add_arguments(parser)
    sets = [f"--set={name}={value}" for name, value in request.params.items()]
    args = parser.parse_args([request.runbook, "--format", "json", *sets])
    for name in SHARED:
        setattr(args, name, getattr(serve, name))
    # Node names come from labels checked to be host names (alerts/hosts.py): no list, no range.
    args.nodes = ",".join(request.nodes) or None
    args.slurm_job = request.slurm_job
    return args


def diagnose_alert(serve: argparse.Namespace, request: Any, policy: Any) -> dict[str, Any]:
    """The report of the alert's run; raises DiagnosisFailed with a one-line reason."""
    from runbook.alerts.runner import DiagnosisFailed
    from runbook.cli.run.command import UsageError, diagnose
    from runbook.report.silent import SilentReporter
    from runbook.run.targets import JobNotRunning

    try:
        args = run_args(serve, request)
        return diagnose(args, SilentReporter(), policy).report
    except JobNotRunning as exc:
        raise DiagnosisFailed(str(exc)) from None
    except UsageError as exc:
        why = str(exc) or f"runbook {request.runbook} did not load (the receiver's log says why)"
        raise DiagnosisFailed(why) from None
    except SystemExit:  # argparse refusing a value: it has printed why
        raise DiagnosisFailed(f"runbook {request.runbook}: bad parameters {sorted(request.params)}") from None
