"""collect: the redacted diagnosis bundle of `runbook collect`, written to a new file on the
server's machine, and a summary of what each node gave (collect/bundle.py does the work)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from runbook.collect.archive import index_json
from runbook.collect.bundle import BundleError, Limits, Request, make_request, summary, write_bundle
from runbook.mcp_server.answer import Answer, ToolInputError
from runbook.mcp_server.progress import NodeCounter, Report
from runbook.mcp_server.safety import ServerOptions, bounded_timeout
from runbook.mcp_server.targets import CONNECT_TIMEOUT_S, FORKS, Where, reach
from runbook.run.targets import default_log, transports_from_args


@dataclass
class CollectRequest:
    """One collect call: where the bundle goes, and what `runbook collect --set` would say."""

    output: str
    where: Where = field(default_factory=Where)
    log: str | None = None
    config: list[str] = field(default_factory=list)
    pid: int | None = None
    match: str | None = None
    timeout_s: float | None = None
    section_timeout_s: float | None = None


def collect(request: CollectRequest, options: ServerOptions, lang: str = "en",
            report: Report | None = None) -> Answer:
    """The bundle's index (runbook-bundle index.json, with the file, its size and member count)
    and the summary `runbook collect` prints."""
    bundle_request = make_bundle_request(request)
    limits = Limits(timeout=bounded_timeout(request.timeout_s, options),
                    section_timeout=None if request.section_timeout_s is None else
                    bounded_timeout(request.section_timeout_s, options, "section_timeout_s"),
                    forks=FORKS, connect_timeout=CONNECT_TIMEOUT_S)
    args, nodes = reach(request.where, options)
    default_log(args, bundle_request.params)
    counter = NodeCounter(len(nodes), report)
    bundle = write_bundle(nodes, transports_from_args(args), bundle_request, limits,
                          on_node_done=lambda name: counter.node_done(name, "collected"))
    meta = {"bundle": str(bundle.output), "size_bytes": bundle.size, "files": bundle.files,
            "duration_s": round(bundle.elapsed_s, 3)}
    kib = f"{bundle.size / 1024:.1f} KiB"
    headline = (f"诊断包 {bundle.output}：{len(nodes)} 个节点，{kib}，{bundle.files} 个文件" if lang == "zh"
                else f"bundle {bundle.output}: {len(nodes)} node(s), {kib}, {bundle.files} files")
    text = f"{headline}\n{summary(bundle).rstrip()}"
    return Answer(index_json(bundle.entries, meta, bundle.incomplete), text)


def make_bundle_request(request: CollectRequest) -> Request:
    """The checked request; a bundle only ever goes to a new file in a folder that exists."""
    output = Path(os.path.abspath(os.path.expanduser(request.output)))
    if output.exists():
        raise ToolInputError(f"output: {output} exists; name a new file (a bundle never replaces one)")
    if not output.parent.is_dir():
        raise ToolInputError(f"output: the folder {output.parent} does not exist")
    sets = [f"{name}={value}" for name, value in (("log", request.log), ("pid", request.pid),
                                                  ("match", request.match)) if value is not None]
    sets += [f"config={path}" for path in request.config]
    try:
        return make_request(sets, str(output))
    except BundleError as exc:  # its messages name `--set NAME=VALUE`: here the argument is NAME
        raise ToolInputError(str(exc).replace("--set ", "")) from None
