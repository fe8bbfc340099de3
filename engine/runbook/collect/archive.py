"""The diagnosis bundle of `runbook collect`: its index and its reproducible .tar.gz.

Reproducible means the same members give the same bytes: members sorted by name, each with a
fixed mtime, uid/gid 0, no owner names and mode 0644, and a gzip header without a timestamp or
file name. Nothing time-dependent belongs in a member except index.json's `collected_at` and
durations, so INDEX.md, the file list and everything else depend only on what was collected.
(Not to be confused with `transports/bundle.py`, the probe zipapp.)
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

INDEX_SCHEMA = "runbook-bundle/v1"
FIXED_MTIME = 1577836800  # 2020-01-01T00:00:00Z: tools warn about archives dated 1970
FILE_MODE = 0o644

# Section statuses. Only the failures make `collect` exit 3: `absent` means there was nothing
# to collect (no GPU, Ray not running, no log given), which is itself a finding.
COLLECTED, ABSENT = "collected", "absent"
TIMEOUT, DENIED, FAILED, UNREACHABLE = "timeout", "denied", "failed", "unreachable"
FAILURES = frozenset({TIMEOUT, DENIED, FAILED, UNREACHABLE})

_UNSAFE = re.compile(r"[^A-Za-z0-9._@+\-]")


@dataclass
class SectionEntry:
    """One section of one node as the index describes it."""

    section: str
    file: str  # member name, NODE/SECTION.txt
    status: str
    reason: str | None = None
    source: str = ""
    size_bytes: int = 0
    duration_s: float = 0.0


@dataclass
class NodeEntry:
    node: str
    status: str  # complete | partial (some section could not be collected) | unreachable
    reason: str | None = None
    sections: list[SectionEntry] = field(default_factory=list)


def node_dir(name: str) -> str:
    """A node's folder in the bundle: its name with anything odd for a path replaced by _."""
    cleaned = _UNSAFE.sub("_", name).lstrip(".")
    return cleaned or "_"


def archive_bytes(members: Mapping[str, bytes]) -> bytes:
    """The .tar.gz of `members` (name -> content); the same members give the same bytes."""
    raw = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as zipped, \
            tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(members):
            data = members[name]
            tar.addfile(_info(name, len(data)), io.BytesIO(data))
    return raw.getvalue()


def _info(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mtime = FIXED_MTIME
    info.mode = FILE_MODE
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.type = tarfile.REGTYPE
    return info


def write_archive(path: Path, members: Mapping[str, bytes]) -> int:
    """Write the archive next to `path` first, then move it in place; returns its size."""
    data = archive_bytes(members)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        tmp.write_bytes(data)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return len(data)


# -- the index -------------------------------------------------------------------------------


def index_json(nodes: list[NodeEntry], meta: dict[str, Any], incomplete: str | None = None) -> dict[str, Any]:
    """index.json: `meta` (collected_at, params...) and every node's sections. A collection
    stopped early (`incomplete`: why) says so in its summary: `incomplete` and `reason`."""
    failures = [s for n in nodes for s in n.sections if s.status in FAILURES]
    stopped = {"incomplete": True, "reason": incomplete} if incomplete else {}
    return {
        "schema": INDEX_SCHEMA,
        **meta,
        "nodes": [_node_json(n) for n in nodes],
        "summary": {
            "nodes": len(nodes),
            "unreachable": sorted(n.node for n in nodes if n.status == UNREACHABLE),
            "sections_collected": sum(s.status == COLLECTED for n in nodes for s in n.sections),
            "sections_not_collected": len(failures),
            "exit_code": 3 if failures else 0,
            **stopped,
        },
    }


def _node_json(node: NodeEntry) -> dict[str, Any]:
    return {"node": node.node, "dir": node_dir(node.node), "status": node.status,
            "reason": node.reason,
            "sections": [{"section": s.section, "file": s.file, "status": s.status, "reason": s.reason,
                          "source": s.source, "size_bytes": s.size_bytes,
                          "duration_s": round(s.duration_s, 3)} for s in node.sections]}


def index_markdown(nodes: list[NodeEntry], header: list[str], incomplete: str | None = None) -> str:
    """INDEX.md: a table per node (no times, so the same collection reads the same)."""
    lines = ["# Diagnosis bundle", ""]
    if incomplete:
        lines += [f"**INCOMPLETE: {incomplete}.** The collection was stopped before it finished: "
                  "the sections not collected by then say so.", ""]
    lines += [*header, ""]
    for node in nodes:
        collected = sum(s.status == COLLECTED for s in node.sections)
        state = f"unreachable: {node.reason}" if node.status == UNREACHABLE else \
            f"{collected} of {len(node.sections)} sections collected" + \
            (f" (connection lost: {node.reason})" if node.reason else "")
        lines += [f"## {node.node} — {state}", "",
                  "| section | file | status | bytes | why not collected / note |",
                  "|---|---|---|---:|---|"]
        lines += [f"| {s.section} | `{s.file}` | {s.status} | {s.size_bytes} | {_cell(s.reason)} |"
                  for s in node.sections]
        lines.append("")
    return "\n".join(lines)


def _cell(text: str | None) -> str:
    return (text or "").replace("|", "\\|").replace("\n", " ")


def json_bytes(data: Any) -> bytes:
    return (json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False) + "\n").encode("utf-8")
