"""The arguments of `runbook mcp` (argparse only: `runbook mcp --help` imports no more)."""

import argparse

from runbook.cli.common_args import add_lang, positive_int

DEFAULT_PORT = 8765  # not 8000: `runbook site serve` has that one


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = ("Example: claude mcp add runbook -- runbook mcp   (docs/mcp.md: other clients, "
                     "the safety model, an example conversation)")
    serving = parser.add_argument_group("serving")
    serving.add_argument("--http", action="store_true",
                         help="serve streamable HTTP on 127.0.0.1 (path /mcp) instead of stdio")
    serving.add_argument("--port", type=int, default=None, metavar="PORT",
                         help=f"with --http: the port (default {DEFAULT_PORT})")
    limits = parser.add_argument_group("what the assistant may do (default: read only)")
    limits.add_argument("--allow-read-only-fixes", action="store_true",
                        help="let run_runbook apply the fixes whose effect is read-only when a call "
                             "asks; never changes-state or disruptive ones")
    limits.add_argument("--max-nodes", type=positive_int, default=64, metavar="N",
                        help="refuse a call that names more than N nodes, and fixes on more than N "
                             "(the blast radius, as `runbook run --max-nodes`; default 64)")
    limits.add_argument("--timeout", type=float, default=300.0, metavar="S",
                        help="the longest a run, check or collection may take, in seconds (default 300)")
    limits.add_argument("--audit-log", metavar="FILE",
                        help="where every tool call and executed fix is recorded (default: "
                             "$XDG_STATE_HOME/runbook/audit.jsonl, as `runbook run`)")
    add_lang(parser)
