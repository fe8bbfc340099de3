"""The MCP server: an `MCPServer` with the runbook tools and resources, every tool call recorded
in the audit log and every failure answered as a one-line error result (never a traceback);
served over stdio, or streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import logging
import time
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, TextContent
from pydantic import ValidationError

from runbook import __version__
from runbook.mcp_server.answer import ToolInputError, one_line
from runbook.mcp_server.audit import check_writable, record_call
from runbook.mcp_server.resources import register_resources
from runbook.mcp_server.safety import ServerOptions
from runbook.mcp_server.tools import register_tools

HOST = "127.0.0.1"  # never another interface: the tools reach the cluster as the user who started it
INSTRUCTIONS = (
    "Runbooks for distributed-training failures (PyTorch, NCCL, Ray, Slurm), in English and 中文. "
    "When the user pastes a log, call triage_log first; run the runbook it names with run_runbook on "
    "the nodes the user names (set `log` to the training log), then explain the conclusion, its "
    "evidence and its fixes. Fixes are shown, not applied: the user runs them.")
log = logging.getLogger("runbook.mcp")


class RunbookServer(MCPServer):
    """The SDK's server, with each tool call audited and its errors made one line."""

    def __init__(self, options: ServerOptions) -> None:
        super().__init__(name="runbook", title="runbook", version=__version__, instructions=INSTRUCTIONS,
                         log_level="WARNING")
        self.options = options

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context[Any, Any] | None = None) -> Any:
        begin = time.monotonic()
        try:
            answer = await super().call_tool(name, arguments, context)
        except ToolError as exc:
            answer = CallToolResult(content=[TextContent(type="text", text=error_line(name, exc))],
                                    is_error=True)
        record_call(self.options.audit_log, name, arguments, error_of(answer), time.monotonic() - begin)
        return answer


def error_of(answer: Any) -> str | None:
    """An error result's message (for the audit log), or None when the call answered."""
    if not isinstance(answer, CallToolResult) or not answer.is_error:
        return None
    return " ".join(block.text for block in answer.content if isinstance(block, TextContent))


def error_line(tool: str, exc: ToolError) -> str:
    """What the assistant reads: the tool, then what to fix (or that the server failed)."""
    cause = exc.__cause__
    if isinstance(cause, ToolInputError):
        return f"{tool}: {one_line(str(cause))}"
    if isinstance(cause, ValidationError):  # the arguments do not fit the input schema
        wrong = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}"
                          for e in cause.errors())
        return f"{tool}: {one_line(wrong)}"
    if isinstance(exc, UnexpectedToolError):
        log.error("tool %s failed", tool, exc_info=cause)  # the traceback stays in the server's log
        return (f"{tool}: internal error: {type(cause).__name__}: {one_line(str(cause))} (the traceback is "
                "in the server's log)")
    return one_line(str(exc))  # an unknown tool


def build_server(options: ServerOptions) -> RunbookServer:
    server = RunbookServer(options)
    register_tools(server, options)
    register_resources(server)
    return server


def serve(options: ServerOptions, http_port: int | None = None) -> None:
    """Serve until the client goes (stdio) or Ctrl-C (HTTP). Raises OSError when the audit log
    cannot be written: nothing runs that could not be recorded."""
    check_writable(options.audit_log)
    if http_port is not None:
        check_port_free(http_port)
    server = build_server(options)
    if http_port is None:
        server.run("stdio")
    else:
        server.run("streamable-http", host=HOST, port=http_port)


def check_port_free(port: int) -> None:
    """Raises OSError in one line when 127.0.0.1:PORT cannot be listened on (taken, or privileged),
    before the HTTP server would fail on it with a log of its own."""
    import socket

    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the HTTP server binds
        try:
            probe.bind((HOST, port))
        except OSError as exc:
            raise OSError(f"--port {port}: cannot listen on {HOST}:{port} ({exc.strerror or exc})") from None
