"""`runbook mcp`: serve the runbooks to an assistant over stdio, or streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from runbook.mcp_server.safety import ServerOptions


def run(args: argparse.Namespace) -> int:
    from runbook.cli.mcp.args import DEFAULT_PORT

    problem = _usage_problem(args)
    if problem:
        print(f"runbook mcp: {problem}", file=sys.stderr)
        return 2
    try:
        from runbook.mcp_server.server import serve
    except ModuleNotFoundError as exc:
        if (exc.name or "").startswith("runbook"):
            raise
        print(f"runbook mcp: the MCP server needs the MCP SDK (no module {exc.name!r}): "
              "pip install 'runbook[mcp]'", file=sys.stderr)
        return 2
    try:
        serve(_options(args), (args.port or DEFAULT_PORT) if args.http else None)
    except OSError as exc:  # the audit log cannot be written, the port is taken
        print(f"runbook mcp: {exc}", file=sys.stderr)
        return 2
    return 0


def _usage_problem(args: argparse.Namespace) -> str | None:
    if args.port is not None and not args.http:
        return "--port goes with --http (stdio needs no port)"
    if args.port is not None and not 0 < args.port < 65536:
        return f"--port {args.port}: not a port (1-65535)"
    if args.timeout <= 0:
        return f"--timeout {args.timeout:g}: must be a positive number of seconds"
    return None


def _options(args: argparse.Namespace) -> ServerOptions:
    from pathlib import Path

    from runbook.mcp_server.safety import ServerOptions
    from runbook.run.audit import default_audit_log

    return ServerOptions(allow_read_only_fixes=args.allow_read_only_fixes, max_nodes=args.max_nodes,
                         timeout_s=args.timeout, lang=args.lang,
                         audit_log=Path(args.audit_log) if args.audit_log else default_audit_log())
