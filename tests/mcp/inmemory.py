"""What the MCP tests share: a server built in this process, called through the SDK's in-memory
client, and the checks every error result must pass."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.types import CallToolResult

from runbook.mcp_server.safety import ServerOptions
from runbook.mcp_server.server import RunbookServer, build_server

ROOT = Path(__file__).resolve().parents[2]
FIXES = ROOT / "tests" / "data" / "fixes"  # fix-demo: fixes that really act on a folder
LOGS = ROOT / "tests" / "data" / "logs"
Progress = list[tuple[float, float | None, str | None]]


def server(audit_log: Path, **options: Any) -> RunbookServer:
    return build_server(ServerOptions(audit_log=audit_log, lang="en", **options))


def call(on: RunbookServer, tool: str, arguments: dict[str, Any] | None = None,
         progress: Progress | None = None) -> CallToolResult:
    """One tool call through the SDK's in-memory client; progress notifications go to `progress`."""
    async def heard(done: float, total: float | None, message: str | None) -> None:
        if progress is not None:
            progress.append((done, total, message))

    return anyio.run(_with_client, on, lambda client: client.call_tool(tool, arguments or {},
                                                                        progress_callback=heard))


def session(on: RunbookServer, work: Callable[[Client], Awaitable[Any]]) -> Any:
    """`work(client)` with a client connected in memory (listing tools, reading resources)."""
    return anyio.run(_with_client, on, work)


async def _with_client(on: RunbookServer, work: Callable[[Client], Awaitable[Any]]) -> Any:
    async with Client(on) as client:
        return await work(client)


def text(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


def error(result: CallToolResult) -> str:
    """The error result's message, checked to be one line with no traceback."""
    message = text(result)
    assert result.is_error, message
    assert "\n" not in message and "Traceback" not in message and message.strip(), message
    assert result.structured_content is None
    return message


def audit_entries(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()] if path.exists() else []
