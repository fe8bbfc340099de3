"""What the server may do, as the person who started it allowed: the fixes a call may apply
(none, or with --allow-read-only-fixes the read-only ones), how many nodes a call may reach
(--max-nodes), and how long it may take (--timeout). DESIGN: nothing an assistant starts changes
state unless a person allowed it in configuration, and then only `read-only`-effect fixes."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runbook.mcp_server.answer import ToolInputError
from runbook.run.audit import default_audit_log
from runbook.run.fixes import FixPolicy
from runbook.run.redact import Redactor
from runbook.transports import Node

DEFAULT_MAX_NODES = 64
DEFAULT_TIMEOUT_S = 300.0  # as `runbook run --timeout` and `runbook collect --timeout`
NO_FIXES = ("this server applies no fix (a person starts it with --allow-read-only-fixes to let it "
            "apply read-only ones)")
READ_ONLY_ONLY = ("an assistant applies read-only fixes only; a person runs `runbook run --apply` "
                  "for the others")


# What runs a program or code the caller names: never chosen by an assistant (a line in a log it
# reads could steer it), whatever the flags; a person still can, on the command line.
CODE_CHECKS = {"command": "runs a shell command", "python": "runs Python code"}
CODE_PARAMS = {"run": "is a command to run", "code": "is code to run",
               "python": "names the interpreter to run", "py_spy": "names the program to run",
               "pythonpath": "puts code on the import path", "reference": "can name code to import and call",
               "reference_kwargs": "are arguments for code to call", "allow_pickle": "lets a pickle run code"}


@dataclass(frozen=True)
class ServerOptions:
    """The flags of `runbook mcp`: everything a tool call may not exceed."""

    allow_read_only_fixes: bool = False
    max_nodes: int = DEFAULT_MAX_NODES
    timeout_s: float = DEFAULT_TIMEOUT_S
    audit_log: Path = field(default_factory=default_audit_log)
    lang: str = "en"


def fix_policy(options: ServerOptions, apply: bool, params: dict[str, Any]) -> FixPolicy:
    """The policy of one run_runbook call: a dry run unless the call asks to apply; then the
    read-only fixes if the server allows them, else none, each held back with the reason."""
    allowed = ("read-only",) if options.allow_read_only_fixes else ()
    return FixPolicy(apply=apply, yes=False, interactive=False, max_nodes=options.max_nodes,
                     audit_log=options.audit_log, redactor=Redactor.for_params(params),
                     effects=allowed, not_allowed=READ_ONLY_ONLY if allowed else NO_FIXES)


def check_node_count(nodes: list[Node], options: ServerOptions) -> None:
    """Refuse a call that names more nodes than --max-nodes, before any node is reached."""
    if len(nodes) > options.max_nodes:
        raise ToolInputError(f"nodes: {len(nodes)} nodes, more than --max-nodes {options.max_nodes}; "
                             "nothing was run (narrow the nodes, or a person restarts the server "
                             "with a higher --max-nodes)")


def bounded_timeout(requested: float | None, options: ServerOptions, name: str = "timeout_s") -> float:
    """The call's timeout: its own when given and positive, never more than --timeout."""
    if requested is None:
        return options.timeout_s
    if requested <= 0:
        raise ToolInputError(f"{name}: {requested:g} is not a positive number of seconds")
    return min(float(requested), options.timeout_s)


def refuse_code(argument: str, names: Any, check_type: str | None = None) -> None:
    """Refuse a check type, or a parameter (of `set` or a check's `params`), that names a program
    or code to run."""
    if check_type in CODE_CHECKS:
        raise ToolInputError(f"check_type: {check_type} {CODE_CHECKS[check_type]}: not for an assistant "
                             "(run_runbook walks the runbooks' own checks)")
    for name in names:
        if name in CODE_PARAMS:
            raise ToolInputError(f"{argument} {name}: {CODE_PARAMS[name]}, which an assistant may not "
                                 f"choose (a person can: runbook on the command line)")
    if isinstance(names, dict) and names.get("weights_only") is False:
        raise ToolInputError(f"{argument} weights_only: false would unpickle, which can run code")
