"""The tools an assistant sees: their names, descriptions, input schemas and annotations.

Each method of `RunbookTools` is one tool; the SDK reads its signature (the `Field` descriptions
below) for the input schema. A method only gathers its arguments and hands them to the module
that calls the engine (catalog, logs, diagnose, bundle); what comes back is structured content
and a short text. Errors are raised, and server.py makes them one-line error results.
"""

# No `from __future__ import annotations`: the SDK and pydantic read these annotations at runtime.

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from runbook.mcp_server import bundle, catalog, diagnose, logs
from runbook.mcp_server.answer import Answer
from runbook.mcp_server.progress import ContextProgress
from runbook.mcp_server.safety import ServerOptions
from runbook.mcp_server.targets import Where

ZH = " Give lang: zh for the answer in 中文 (Chinese); text arguments may be in either language."
Lang = Annotated[Literal["en", "zh"] | None,
                 Field(description="the answer's language: en (English) or zh (中文); default: the "
                                   "server's --lang")]
Top = Annotated[int, Field(description="how many results at most (1-50)")]
Nodes = Annotated[str | None, Field(description=(
    "the nodes, as `runbook run --nodes` reads them: a,b  gpu[01-16]  @hostfile  localhost. "
    "Default: the machine the server runs on. Capped by the server's --max-nodes"))]
Inventory = Annotated[str | None, Field(description="an inventory file on the server's machine: "
                                                    "runbook's YAML, or an Ansible INI/YAML inventory")]
Group = Annotated[str | None, Field(description="the inventory group to use (default: all its hosts)")]
SlurmJob = Annotated[str | None, Field(description=(
    "a running Slurm job's id: its nodes, reached through its own allocation (srun --overlap), "
    "and its StdOut as the default `log`"))]
Timeout = Annotated[float | None, Field(description="seconds the call may take at most (default and "
                                                    "ceiling: the server's --timeout)")]


def result(answer: Answer) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=answer.text)],
                          structured_content=answer.structured)


class RunbookTools:
    """One method per tool, bound to the limits the server was started with."""

    def __init__(self, options: ServerOptions) -> None:
        self.options = options

    def _lang(self, lang: str | None) -> str:
        return lang or self.options.lang

    def list_runbooks(self, lang: Lang = None) -> CallToolResult:
        return result(catalog.list_runbooks(self._lang(lang)))

    def show_runbook(
        self,
        runbook: Annotated[str, Field(description="the runbook's id, e.g. training-hang "
                                                  "(ID@1.2.0 or ID@sha256:PREFIX pins a version)")],
        lang: Lang = None,
    ) -> CallToolResult:
        return result(catalog.show_runbook(runbook, self._lang(lang)))

    def search(
        self,
        query: Annotated[str, Field(description="words to look for, in English or 中文, e.g. "
                                                "'NCCL timeout' or 显存不足")],
        top: Top = 10,
        lang: Lang = None,
    ) -> CallToolResult:
        return result(catalog.search(query, top, self._lang(lang)))

    def triage_log(
        self,
        text: Annotated[str | None, Field(description="the log, pasted (the error and the lines "
                                                      "before it)")] = None,
        path: Annotated[str | None, Field(description="or a log file, or a folder of rank or node "
                                                      "logs, on the server's machine (gzip too)")] = None,
        top: Top = 10,
        lang: Lang = None,
    ) -> CallToolResult:
        return result(logs.triage_log(text, path, top, self._lang(lang)))

    def run_runbook(
        self,
        runbook: Annotated[str, Field(description="the runbook's id, e.g. training-hang (see "
                                                  "list_runbooks, or what triage_log names)")],
        ctx: Context,
        set: Annotated[dict[str, str | int | float | bool] | None, Field(description=(
            "the runbook's parameters, as `runbook run --set NAME=VALUE`, e.g. "
            '{"log": "/path/train.log", "stall_after": 60}; show_runbook lists them. Parameters '
            "that name a program or code to run (python, pythonpath, reference) are refused"))] = None,
        nodes: Nodes = None,
        inventory: Inventory = None,
        group: Group = None,
        slurm_job: SlurmJob = None,
        timeout_s: Timeout = None,
        apply_read_only_fixes: Annotated[bool, Field(description=(
            "run the conclusions' read-only fixes (only where the server was started with "
            "--allow-read-only-fixes; never changes-state or disruptive ones)"))] = False,
        lang: Lang = None,
    ) -> CallToolResult:
        request = diagnose.RunRequest(runbook, Where(nodes, inventory, group, slurm_job), set or {},
                                      timeout_s, apply_read_only_fixes, self._lang(lang))
        return result(diagnose.run_runbook(request, self.options, ContextProgress(ctx)))

    def check(
        self,
        check_type: Annotated[str, Field(description="the check type, e.g. process, log, stack, gpu, "
                                                     "env, port (show_runbook's steps use them)")],
        ctx: Context,
        params: Annotated[dict[str, Any] | None, Field(description=(
            "the check's parameters, as a runbook step's `with:`, e.g. {\"match\": \"train.py\"}"))] = None,
        nodes: Nodes = None,
        inventory: Inventory = None,
        group: Group = None,
        slurm_job: SlurmJob = None,
        timeout_s: Timeout = None,
        lang: Lang = None,
    ) -> CallToolResult:
        where = Where(nodes, inventory, group, slurm_job)
        return result(diagnose.check(check_type, params or {}, where, timeout_s, self.options,
                                     self._lang(lang), ContextProgress(ctx)))

    def collect(
        self,
        output: Annotated[str, Field(description="where the bundle (.tar.gz) goes on the server's "
                                                 "machine: a new file in a folder that exists")],
        ctx: Context,
        log: Annotated[str | None, Field(description="the training log (a glob picks the newest)")] = None,
        config: Annotated[list[str] | None, Field(description="config files or globs to include")] = None,
        pid: Annotated[int | None, Field(description="the training process (default: found "
                                                     "from the log)")] = None,
        match: Annotated[str | None, Field(description="or a regex on its command line")] = None,
        nodes: Nodes = None,
        inventory: Inventory = None,
        group: Group = None,
        slurm_job: SlurmJob = None,
        timeout_s: Timeout = None,
        section_timeout_s: Annotated[float | None, Field(description="seconds each section may take "
                                                                     "(default: its own, 5 to 90)")] = None,
        lang: Lang = None,
    ) -> CallToolResult:
        request = bundle.CollectRequest(output, Where(nodes, inventory, group, slurm_job), log,
                                        config or [], pid, match, timeout_s, section_timeout_s)
        return result(bundle.collect(request, self.options, self._lang(lang), ContextProgress(ctx)))


def _hints(title: str, read_only: bool = True, open_world: bool = False) -> ToolAnnotations:
    return ToolAnnotations(title=title, read_only_hint=read_only, destructive_hint=False,
                           idempotent_hint=read_only, open_world_hint=open_world)


# name -> (description, annotations). Descriptions are what an assistant reads to choose a tool.
TOOLS: dict[str, tuple[str, ToolAnnotations]] = {
    "list_runbooks": (
        "List the runbooks (diagnosis trees for distributed-training failures: hangs, NCCL, OOM, "
        "Ray, Slurm...) with id, version and title." + ZH,
        _hints("List runbooks")),
    "show_runbook": (
        "Show one runbook: its symptoms, parameters (what `set` of run_runbook takes), steps and "
        "branches, conclusions and their fixes, with each fix's effect." + ZH,
        _hints("Show a runbook")),
    "search": (
        "Search runbooks and knowledge-base articles by words, in English or 中文; best first, "
        "with a snippet." + ZH,
        _hints("Search runbooks and articles")),
    "triage_log": (
        "Name the failures a training log shows, root cause first, with the lines that say so and "
        "the runbook to run next. Give the log pasted as `text`, or a `path` on the server's "
        "machine." + ZH,
        _hints("Triage a log")),
    "run_runbook": (
        "Diagnose: walk a runbook on nodes (this machine by default) and conclude on each, with "
        "the evidence. Returns the runbook-report/v1 document and a short summary. Fixes are "
        "shown, never applied, unless apply_read_only_fixes is set and the server allows "
        "read-only fixes. Reports progress: nodes done and left." + ZH,
        _hints("Run a runbook", open_world=True)),
    "check": (
        "Run one check ad hoc on nodes (like ansible -m): process, log, stack, gpu, env, port, "
        "file, network... Returns the runbook-check/v1 document: each node's result fields. The "
        "command and python checks, and parameters naming a program or code to run, are refused." + ZH,
        _hints("Run one check", open_world=True)),
    "collect": (
        "Gather a redacted diagnosis bundle (.tar.gz: processes, environment, stacks, log tail, "
        "nvidia-smi, dmesg, configs, packages) from every node into a new file on the server's "
        "machine; returns what each node gave." + ZH,
        _hints("Collect a diagnosis bundle", read_only=False, open_world=True)),
}


def register_tools(server: MCPServer, options: ServerOptions) -> None:
    tools = RunbookTools(options)
    for name, (description, hints) in TOOLS.items():
        server.add_tool(getattr(tools, name), name=name, title=hints.title, description=description,
                        annotations=hints)
