"""The arguments of `runbook run` (argparse only: `runbook run --help` imports no more)."""

import argparse

from runbook.cli.common_args import add_format, add_lang, add_node_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", help="runbook id, e.g. training-hang; ID@1.2.0 or ID@sha256:PREFIX "
                        "refuses any other version")
    add_node_args(parser)
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="NAME=VALUE",
                        help="a runbook parameter, e.g. --set log=train.log (repeatable)")
    add_format(parser, ("text", "json", "jsonl", "md", "html", "junit"))
    parser.add_argument("--output", "-o", help="write the report to this file")
    add_lang(parser)
    parser.add_argument("--timeout", type=float, default=300.0, metavar="S",
                        help="deadline for the whole run in seconds (default 300)")
    parser.add_argument("--watch", type=float, nargs="?", const=10.0, default=None, metavar="INTERVAL",
                        help="walk again every INTERVAL seconds (default 10) until a node's conclusion "
                             "changes, e.g. the job starts making progress; then report")
    parser.add_argument("--watch-for", type=float, default=None, metavar="S",
                        help="with --watch: give up after S seconds without a change")
    parser.add_argument("--record", metavar="DIR",
                        help="keep every check's raw result per node in DIR/incident.json (secrets "
                             "redacted), so `runbook test --replay DIR` can replay the incident")
    acting = parser.add_argument_group("fixes")
    mode = acting.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true",
                      help="show each fix's command as it would run on each node; run nothing (default)")
    mode.add_argument("--apply", action="store_true",
                      help="run the read-only and changes-state fixes of the conclusions reached, "
                           "after one confirmation")
    acting.add_argument("--yes", "-y", action="store_true",
                        help="with --apply: do not ask, and also run disruptive fixes (never "
                             "without a terminal)")
    acting.add_argument("--max-nodes", type=int, default=None, metavar="N",
                        help="refuse to apply fixes on more than N nodes (the blast radius)")
    acting.add_argument("--keep-going", action="store_true",
                        help="after a failed fix on one node, go on with the others")
    acting.add_argument("--audit-log", metavar="FILE",
                        help="where executed fixes are recorded (default: "
                             "$XDG_STATE_HOME/runbook/audit.jsonl)")
