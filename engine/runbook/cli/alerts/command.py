"""`runbook alerts serve`: the Alertmanager receiver (runbook/alerts/), wired to `runbook run`."""

from __future__ import annotations

import argparse
import functools
import ipaddress
import os
import sys
from pathlib import Path
from typing import Any

NOTIFY_ENV = "RUNBOOK_ALERTS_NOTIFY_URL"


class SetupError(Exception):
    """A bad option or file, found before the receiver listens: one line, exit 2."""


def run(args: argparse.Namespace) -> int:
    from runbook.alerts.receiver import Receiver

    try:
        receiver = Receiver(_settings(args), _router(args), _credentials(args),
                            functools.partial(_diagnose, args), *_answering(args))
        url = receiver.start()
    except SetupError as exc:
        print(f"runbook alerts: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"runbook alerts: cannot listen on {args.host}:{args.port}: {exc.strerror or exc} "
              "(pick another --port)", file=sys.stderr)
        return 2
    # The first stdout line is the address: scripts and tests read it (port 0 picks a free one).
    print(url, flush=True)
    print(f"runbook alerts: Alertmanager posts to {url}/alerts; state in {receiver.settings.state_dir}; "
          "Ctrl-C stops", file=sys.stderr, flush=True)
    try:
        receiver.serve_forever()
    except KeyboardInterrupt:
        print(f"runbook alerts: stopped; {receiver.queue.waiting()} alert(s) still queued run at the "
              "next start", file=sys.stderr)
    finally:
        receiver.close()
    return 0


def _diagnose(args: argparse.Namespace, request: Any, policy: Any) -> dict[str, Any]:
    from runbook.cli.alerts.diagnose import diagnose_alert

    return diagnose_alert(args, request, policy)


def _settings(args: argparse.Namespace) -> Any:
    from runbook.alerts.receiver import Settings
    from runbook.run.audit import default_audit_log

    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Settings(state_dir=Path(args.state_dir or Path(state) / "runbook" / "alerts"),
                    host=args.host, port=args.port, workers=args.workers, max_queue=args.max_queue,
                    max_body=args.max_body, lang=args.lang, public_url=args.public_url,
                    open_page=args.open_page, run_timeout_s=args.timeout,
                    audit_log=Path(args.audit_log) if args.audit_log else default_audit_log())


def _credentials(args: argparse.Namespace) -> Any:
    from runbook.alerts.auth import CredentialsError, load_credentials

    try:
        credentials = load_credentials(args.token_file, args.basic_auth_file)
    except CredentialsError as exc:
        raise SetupError(str(exc)) from None
    if credentials.required or (args.no_auth and _loopback(args.host)):
        return credentials
    if args.no_auth:
        raise SetupError(f"--no-auth only on a loopback address, not {args.host}")
    raise SetupError("give Alertmanager's credentials: --token-file FILE or --basic-auth-file FILE "
                     "(or $RUNBOOK_ALERTS_TOKEN, $RUNBOOK_ALERTS_BASIC_AUTH); --no-auth on loopback only")


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _router(args: argparse.Namespace) -> Any:
    from runbook.alerts.hosts import HostMap, ssh_aliases
    from runbook.alerts.routing import RoutingError, load_router
    from runbook.library.lazy import open_library
    from runbook.run.nodes import NodeSpecError, load_inventory

    try:
        inventory = load_inventory(Path(args.inventory), args.group) if args.inventory else {}
        hosts = HostMap(inventory, ssh_aliases(Path(os.environ.get("HOME") or "/") / ".ssh" / "config"))
        return load_router(Path(args.routes) if args.routes else None, set(open_library().by_id), hosts)
    except (RoutingError, NodeSpecError) as exc:
        raise SetupError(str(exc)) from None


def _answering(args: argparse.Namespace) -> tuple[Any, Any]:
    from runbook.alerts.notify import Notifier
    from runbook.alerts.outbound import check_url
    from runbook.alerts.silence import Silencer

    notify_url = args.notify_url or os.environ.get(NOTIFY_ENV)
    try:
        silencer = Silencer(check_url(args.silence_url, "--silence-url")) if args.silence_url else None
        notifier = Notifier(check_url(notify_url, "--notify-url"), args.notify_format) if notify_url else None
    except ValueError as exc:
        raise SetupError(str(exc)) from None
    return silencer, notifier
