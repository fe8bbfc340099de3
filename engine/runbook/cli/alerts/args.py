"""The arguments of `runbook alerts` (argparse only: `runbook alerts --help` imports no more)."""

import argparse

from runbook.cli.common_args import add_lang, add_reach_args, positive_int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="alerts_command", metavar="ACTION", required=True)
    serve = actions.add_parser(
        "serve", help="receive Alertmanager's webhook and diagnose each firing alert (read-only)",
        description="Receive Alertmanager's webhook (payload version 4) and run the alert's runbook on "
                    "the nodes it names, in the background: reports in the state directory, a page of "
                    "recent alerts, an optional notification and silence. Fixes are shown, not applied "
                    "(a route may allow read-only ones). Credentials come from a file or the "
                    "environment: RUNBOOK_ALERTS_TOKEN (bearer), RUNBOOK_ALERTS_BASIC_AUTH (USER:PASSWORD).")
    _listening(serve)
    _running(serve)
    _answering(serve)
    add_reach_args(serve.add_argument_group("nodes (as for runbook run)"))


def _listening(serve: argparse.ArgumentParser) -> None:
    group = serve.add_argument_group("receiving")
    group.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    group.add_argument("--port", type=int, default=9095, help="port (default 9095; 0 picks a free one)")
    group.add_argument("--token-file", metavar="FILE", help="the bearer token Alertmanager sends "
                       "(http_config.authorization.credentials_file); or $RUNBOOK_ALERTS_TOKEN")
    group.add_argument("--basic-auth-file", metavar="FILE", help="USER:PASSWORD on one line (http_config."
                       "basic_auth); or $RUNBOOK_ALERTS_BASIC_AUTH")
    group.add_argument("--no-auth", action="store_true",
                       help="accept alerts without credentials (only on a loopback address)")
    group.add_argument("--max-body", type=positive_int, default=1 << 20, metavar="BYTES",
                       help="refuse larger notifications with 413 (default 1 MiB)")
    group.add_argument("--open-page", action="store_true",
                       help="serve the page and the reports without credentials (behind your proxy)")


def _running(serve: argparse.ArgumentParser) -> None:
    group = serve.add_argument_group("running")
    group.add_argument("--routes", metavar="FILE", help="the routing file: alert matchers -> runbook, "
                       "parameters, fixes (docs/alerts.md)")
    group.add_argument("--state-dir", metavar="DIR", help="queue, reports and history (default: "
                       "$XDG_STATE_HOME/runbook/alerts)")
    group.add_argument("--workers", type=positive_int, default=2, metavar="N",
                       help="diagnoses run at once (default 2)")
    group.add_argument("--max-queue", type=positive_int, default=100, metavar="N",
                       help="alerts waiting at most; more are refused with 503 and retried (default 100)")
    group.add_argument("--timeout", type=float, default=300.0, metavar="S",
                       help="deadline of each diagnosis in seconds (default 300)")
    group.add_argument("--audit-log", metavar="FILE", help="where each run and each fix it ran is "
                       "recorded (default: $XDG_STATE_HOME/runbook/audit.jsonl, as runbook run)")


def _answering(serve: argparse.ArgumentParser) -> None:
    add_lang(serve)
    group = serve.add_argument_group("answering")
    group.add_argument("--public-url", metavar="URL",
                       help="this receiver's URL as people reach it, for report links (default: its address)")
    group.add_argument("--notify-url", metavar="URL", help="post each conclusion there (default: "
                       "$RUNBOOK_ALERTS_NOTIFY_URL; a chat's webhook URL is a secret)")
    group.add_argument("--notify-format", choices=("slack", "json"), default="slack",
                       help="slack: {text} for Slack and compatible chats; json: every field (default slack)")
    group.add_argument("--silence-url", metavar="URL", help="Alertmanager's URL: silence each alert "
                       "while its diagnosis runs, expire the silence when it ends")
