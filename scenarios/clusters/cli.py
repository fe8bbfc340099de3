"""The command line every test cluster has: `up N --dir DIR` and `down --dir DIR`.

    python3 -m scenarios.clusters.ssh up 4 --dir /tmp/c4 --port auto   # one line of JSON; up until Ctrl-C
    python3 -m scenarios.clusters.ssh down --dir /tmp/c4               # if `up` itself was killed

`up` starts the cluster, prints its state file as one line of JSON (for scripts) and a hint
on stderr, stays up until SIGINT, SIGTERM or SIGHUP, then stops it. `down` kills what the
state file in DIR records.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic

from scenarios.clusters.daemon import DaemonError
from scenarios.clusters.group import G, down


@dataclass(frozen=True)
class ClusterCommand(Generic[G]):
    """One cluster's `up` and `down`."""

    prog: str  # python3 -m scenarios.clusters.ssh
    description: str
    members: str  # "hosts", "nodes": what N counts
    dir_help: str  # what DIR holds
    state_file: str  # DIR/<state_file>: what `down` kills
    start: Callable[[argparse.Namespace], G]  # the parsed `up` arguments -> a started cluster
    describe: Callable[[G], str]  # a line for stderr once it is up: how long it took, what to try
    add_arguments: Callable[[argparse.ArgumentParser], None] = lambda up: None  # `up`'s own options

    def main(self, argv: list[str] | None = None) -> int:
        ap = argparse.ArgumentParser(prog=self.prog, description=self.description)
        sub = ap.add_subparsers(dest="cmd", required=True)
        up = sub.add_parser("up", help=f"start N {self.members}, print JSON, stay up until "
                                       "SIGINT/SIGTERM")
        up.add_argument("n", type=int)
        up.add_argument("--dir", required=True, help=f"base directory ({self.dir_help})")
        self.add_arguments(up)
        dn = sub.add_parser("down", help=f"kill the daemons recorded in DIR/{self.state_file}")
        dn.add_argument("--dir", required=True)
        args = ap.parse_args(argv)
        if args.cmd == "down":
            print(json.dumps({"killed": down(args.dir, self.state_file)}))
            return 0
        return serve(lambda: self.start(args), self.describe)


def serve(start: Callable[[], G], describe: Callable[[G], str]) -> int:
    """Start a cluster, print its state as one line of JSON and `describe(cluster)` on
    stderr, stay up until SIGINT, SIGTERM or SIGHUP, then stop it. Exit status 1 when it
    does not start."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    try:
        cluster = start()
    except (DaemonError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    with cluster:
        print(json.dumps(cluster.to_json()), flush=True)
        print(f"# {describe(cluster)}   (Ctrl-C stops them)", file=sys.stderr, flush=True)
        while not stop.wait(0.5):
            pass
    print("# stopped", file=sys.stderr)
    return 0
