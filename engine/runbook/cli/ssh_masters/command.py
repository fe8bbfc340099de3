"""`runbook ssh-masters`: list the kept SSH connections (control masters); --stop ends them."""

from __future__ import annotations

import argparse
import sys


def run(args: argparse.Namespace) -> int:
    from runbook.transports import _masters as masters

    try:
        folder = masters.control_dir()
    except masters.NoControlDir as exc:
        print(f"runbook: {exc}", file=sys.stderr)
        return 1
    found = masters.masters(folder)
    if args.stop:
        stopped = sum(masters.stop(m) for m in found)
        stale = len(found) - stopped
        print(f"stopped {stopped} SSH connection(s)" + (f", removed {stale} stale socket(s)" if stale
                                                        else "") + f" in {folder}")
        return 0
    if not found:
        print(f"no SSH connections kept open (in {folder})")
    for m in sorted(found, key=lambda m: m.host):
        state = f"pid {m.pid}" if m.pid else "stale (its master is gone or stuck; --stop removes it)"
        print(f"{m.host:<40} {state:<10} {m.path}")
    return 0
