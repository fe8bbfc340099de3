"""`runbook mcp`: the runbooks as tools for an on-call assistant (an MCP server; the server itself
is runbook/mcp_server/).

`command.py` holds `run(args) -> int`, `args.py` its `add_arguments(parser)` (argparse only).
This file stays empty of code: `args.py` is imported through it on every command line. The room
is `runbook.cli.mcp`, always imported by that full name: it never hides the SDK's `mcp`.
"""
