"""`runbook run ID --slurm-job JOB` for a job that does not run: say so, then read what Slurm
keeps (its state and exit code, `sacct`'s steps where accounting runs) and triage its logs."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any


def explain_ended_job(job: Any, args: argparse.Namespace) -> int:
    """1 when the logs show a failure (or Slurm says the job failed), 3 when nothing tells why."""
    instead = ("没有正在运行的进程可以检查；改为读取 Slurm 保留的信息和日志" if args.lang == "zh"
               else "nothing runs to check; reading what Slurm keeps and the logs instead")
    print(f"runbook: {job.describe()}: {instead}", file=sys.stderr)
    from runbook.run.slurm import sacct_steps

    for step in sacct_steps(job.id):
        print(f"  step {step.get('step')}: {step.get('state')} (exit {step.get('exit_code')}) "
              f"on {step.get('nodes')}", file=sys.stderr)
    logs = sorted({p for p in (job.stdout, job.stderr) if p and os.path.isfile(p)})
    if not logs:
        print(f"runbook: job {job.id}: its log files ({job.stdout or 'none'}) cannot be read here",
              file=sys.stderr)
        return 1 if job.state in FAILED_STATES else 3
    return _triage(logs, args, failed=job.state in FAILED_STATES)


FAILED_STATES = ("FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "CANCELLED", "PREEMPTED",
                 "BOOT_FAIL", "DEADLINE")


def _triage(logs: list[str], args: argparse.Namespace, failed: bool) -> int:
    import json

    from runbook.cli.triage.command import print_text
    from runbook.library.kb import load_kb
    from runbook.library.runbooks import load_library
    from runbook.triage.result import triage_sources
    from runbook.triage.sources import expand_inputs

    library = load_library()
    result = triage_sources(library, load_kb(), expand_inputs(logs), on_warning=lambda m: None)
    if args.format == "json":
        print(json.dumps(result.to_json(args.lang), ensure_ascii=False, indent=2))
    else:
        print_text(result, args.lang, library)
    return 1 if failed or result.verdict != "no-error" else 3
