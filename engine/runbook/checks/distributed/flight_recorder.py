"""`flight_recorder`: the collectives torch's flight recorder recorded, read from its dumps.

torch records each collective a process group issues (TORCH_FR_BUFFER_SIZE > 0) and dumps the
record per rank: on an NCCL watchdog timeout with TORCH_NCCL_DUMP_ON_TIMEOUT=1 to
`<TORCH_FR_DUMP_TEMP_FILE><rank>` (default prefix /tmp/nccl_trace_rank_), or when a program calls
`_dump_fr_trace()`/`_dump_fr_trace_json()` (gloo on CPU too). This check finds the dumps (the
`paths` given; else the prefix in the selected training processes' environment, its old name
TORCH_NCCL_DEBUG_INFO_TEMP_FILE included; else the default prefix), reads each one bounded in size
(the JSON variant when one lies beside the pickle, else the pickle through a reader that builds
plain data only and refuses every global: a pickle is never loaded as such), and returns every
dump's process groups and its last entries. A file that cannot be read is named in `errors` and
the others are kept. Comparing the ranks is the `flight-recorder` job analysis's part.

With `endpoint`, the dump is fetched instead from a training process's torch debug worker server
on this node (torch.distributed.debug, torch 2.10+: POST /handler/fr_trace_json), localhost only.
"""

from __future__ import annotations

import glob
import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from runbook.checks import _procfs
from runbook.checks.base import CheckContext
from runbook.checks.distributed import _fr_pickle
from runbook.checks.host import process

NAME = "flight_recorder"
SUMMARY = {
    "en": "torch's flight-recorder dumps on the node: per rank, its process groups and the last "
          "collectives it issued (op, sequence number, state, sizes, dtypes, frame)",
    "zh": "节点上 torch flight recorder 的转储：每个 rank 的进程组及其最近发起的集合通信"
          "（操作、序号、状态、大小、数据类型、调用位置）",
}
PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "paths": {"type": ["string", "array"], "items": {"type": "string"},
                  "description": "Dump files: a glob or a list of globs (default: the training "
                                 "processes' TORCH_FR_DUMP_TEMP_FILE prefix, else /tmp/nccl_trace_rank_)"},
        "pid": {"type": ["integer", "string"],
                "description": 'The training process whose dump prefix to read ("" means not given)'},
        "match": {"type": "string",
                  "description": "Regex searched in each process's full command line"},
        "log": process.LOG_PARAM,
        "endpoint": {"type": ["integer", "string"],
                     "description": "A torch debug worker server on this node to fetch the trace from: "
                                    "a port, host:port or http://127.0.0.1:PORT/handler/fr_trace_json "
                                    "(localhost only)"},
    },
    "additionalProperties": False,
}
MAX_ENTRIES = 200  # kept per dump: the last ones
_PG_FIELDS = "name, desc, ranks, pg_id, last_enqueued, last_started, last_completed"
_ENTRY_FIELDS = ("pg_name, pg_desc, collective_seq_id, p2p_seq_id, op, backend, state, input_sizes, "
                 "output_sizes, input_dtypes, frame")
RESULT_FIELDS = {
    "found": {"type": "boolean", "en": "At least one dump was read",
              "zh": "至少读到了一个转储"},
    "reason": {"type": "string", "en": "Why no dump was read: where it looked (null when found)",
               "zh": "没有读到转储的原因，以及查找过的位置（找到时为 null）"},
    "searched": {"type": "array", "en": "The globs, prefixes or endpoint searched",
                 "zh": "查找过的 glob、前缀或 endpoint"},
    "dumps": {"type": "array",
              "en": f"One per rank's dump, by rank: {{path, rank (from the file name's number, else the "
                    f"dump's own field), format (json or pickle), version, pg: [{{{_PG_FIELDS}}}], "
                    f"entries_total, entries: the last {MAX_ENTRIES} [{{{_ENTRY_FIELDS}}}]}}; "
                    "op is the profiling name without its backend prefix, frame the innermost user "
                    "frame (`file:line name`, pickles only: the JSON variant carries no frames)",
              "zh": "每个 rank 的转储一项，按 rank 排序：{path、rank（取自文件名中的数字，"
                    f"否则取转储自身的字段）、format（json 或 pickle）、version、pg：[{{{_PG_FIELDS}}}]、"
                    f"entries_total、entries：最后 {MAX_ENTRIES} 条 [{{{_ENTRY_FIELDS}}}]}}；"
                    "op 是去掉后端前缀的 profiling 名称，frame 是最内层的"
                    "用户代码位置（`文件:行 函数`，仅 pickle 有：JSON 版本不含调用栈）"},
    "errors": {"type": "array",
               "en": "Files that could not be read: {path, reason} (a refused pickle says why)",
               "zh": "无法读取的文件：{path, reason}（被拒绝的 pickle 会说明原因）"},
}
DEFAULT_TIMEOUT = 20.0

DEFAULT_PREFIX = "/tmp/nccl_trace_rank_"
_FR_PREFIX = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
MAX_FILE_BYTES = 32 * 1024 * 1024
MAX_FILES = 256
_LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
_RANK_SUFFIX = re.compile(r"(\d+)$")
_VARIANT_EXT = (".json", ".pickle", ".pkl")
# Frames of torch itself and of Python's own library are not the user's.
_NOT_USER = re.compile(r"/(site|dist)-packages/torch/|/lib/python3[.\d]*/(?!site-packages|dist-packages)|^<")


def run(params: dict[str, Any], ctx: CheckContext) -> dict[str, Any]:
    if params.get("endpoint") not in (None, ""):
        return _from_endpoint(params["endpoint"], ctx)
    globs, searched = _where(params)
    files = _expand(globs)
    dumps, errors = [], []
    for stem, members in _group(files).items():
        if ctx.remaining() <= 0.3:
            errors.append({"path": stem, "reason": "not read: the check ran out of time"})
            continue
        dump = _read_group(stem, members, errors)
        if dump is not None:
            dumps.append(dump)
    dumps.sort(key=lambda d: (d["rank"] is None, d["rank"] if d["rank"] is not None else 0, d["path"]))
    reason = None
    if not dumps:
        reason = (f"no flight-recorder dump read; searched {', '.join(searched)}"
                  + (f" ({len(errors)} unreadable)" if errors else ""))
    return {"found": bool(dumps), "reason": reason, "searched": searched, "dumps": dumps, "errors": errors}


# -- where to look ----------------------------------------------------------------------------------


def _where(params: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(globs to expand, what to say was searched)."""
    paths = params.get("paths")
    if isinstance(paths, str) and paths.strip():
        return [paths], [paths]
    if isinstance(paths, list) and any(str(p).strip() for p in paths):
        given = [str(p) for p in paths if str(p).strip()]
        return given, given
    prefixes = _process_prefixes(params) or [(DEFAULT_PREFIX, DEFAULT_PREFIX)]
    return [glob.escape(readable) + "*" for readable, _ in prefixes], [shown + "*" for _, shown in prefixes]


def _process_prefixes(params: dict[str, Any]) -> list[tuple[str, str]]:
    """(readable path, path as the process sees it) of each selected process's dump prefix."""
    _how, (selected, _unreadable, _reason) = process._select(
        {"pid": params.get("pid"), "match": params.get("match"), "log": params.get("log")})
    found: dict[str, str] = {}
    for pid in sorted(selected):
        try:
            env = _procfs.environ(pid)
        except OSError:
            continue
        prefix = next((env[name] for name in _FR_PREFIX if env.get(name)), None)
        if prefix:
            root = f"/proc/{pid}/root"
            readable = root + prefix if os.path.isdir(root + "/") and prefix.startswith("/") else prefix
            found.setdefault(readable, prefix)
    return list(found.items())


def _expand(globs: list[str]) -> list[str]:
    files: list[str] = []
    for pattern in globs:
        for path in sorted(glob.glob(os.path.expanduser(pattern))):
            if os.path.isfile(path) and path not in files:
                files.append(path)
    return files[: MAX_FILES * 2]


def _group(files: list[str]) -> dict[str, list[str]]:
    """Stem -> its files, the JSON variant first: rank3.json and rank3.pickle are one dump."""
    groups: dict[str, list[str]] = {}
    for path in files:
        stem, ext = os.path.splitext(path)
        key = stem if ext.lower() in _VARIANT_EXT else path
        groups.setdefault(key, []).append(path)
    for members in groups.values():
        members.sort(key=lambda p: (not p.lower().endswith(".json"), p))
    return dict(list(groups.items())[:MAX_FILES])


# -- reading ----------------------------------------------------------------------------------------


def _read_group(stem: str, members: list[str], errors: list[dict[str, Any]]) -> dict[str, Any] | None:
    for path in members:
        try:
            trace, fmt = _read_file(path)
        except (OSError, ValueError) as exc:
            errors.append({"path": path, "reason": _reason(exc)})
            continue
        return describe(trace, path, fmt, _rank_from_name(stem))
    return None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return f"cannot read: {exc.strerror or exc}"
    return str(exc)[:300]


def _read_file(path: str) -> tuple[dict[str, Any], str]:
    with open(path, "rb") as fh:
        data = fh.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise ValueError(f"refused: the file is over the {MAX_FILE_BYTES:,}-byte limit")
    return parse(data, path)


def parse(data: bytes, name: str = "") -> tuple[dict[str, Any], str]:
    """(trace, "json" or "pickle") of one dump's bytes; ValueError saying why it is not one."""
    head = data.lstrip()[:1]
    as_json = name.lower().endswith(".json") or head in (b"{", b"[")
    if as_json:
        try:
            trace = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise ValueError(f"not valid JSON: {exc}"[:300]) from exc
        fmt = "json"
    else:
        trace = _fr_pickle.loads(data, MAX_FILE_BYTES)
        fmt = "pickle"
    if not isinstance(trace, dict) or not isinstance(trace.get("entries", []), list):
        raise ValueError("not a flight-recorder dump: no dict with an `entries` list")
    return trace, fmt


def _rank_from_name(stem: str) -> int | None:
    found = _RANK_SUFFIX.search(os.path.basename(stem))
    return int(found.group(1)) if found else None


# -- describing one dump ----------------------------------------------------------------------------


def describe(trace: dict[str, Any], path: str, fmt: str, rank: int | None) -> dict[str, Any]:
    entries = [e for e in trace.get("entries") or [] if isinstance(e, dict)]
    groups = _groups(trace, entries)
    if rank is None:
        rank = _int(trace.get("rank"))
    if rank is None and len(groups) == 1 and groups[0]["ranks"] is not None and len(groups[0]["ranks"]) == 1:
        rank = groups[0]["ranks"][0]  # a one-rank job: its only rank
    return {"path": path, "rank": rank, "format": fmt, "version": _str(trace.get("version")),
            "pg": groups, "entries_total": len(entries),
            "entries": [_entry(e) for e in entries[-MAX_ENTRIES:]]}


def _groups(trace: dict[str, Any], entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Process groups from pg_config, the entries and pg_status, merged by name.

    gloo writes pg_config under an empty name while its entries say ("0", "default_pg"): a
    config with an empty name that no entry names lends its ranks to the one group entries
    name that has no config of its own."""
    config = trace.get("pg_config") if isinstance(trace.get("pg_config"), dict) else {}
    groups: dict[str, dict[str, Any]] = {}
    for key, value in config.items():
        value = value if isinstance(value, dict) else {}
        name = _str(value.get("name")) if value.get("name") is not None else _str(key)
        groups[name] = {"name": name, "desc": _str(value.get("desc")), "ranks": _ranks(value.get("ranks")),
                        "pg_id": None}
    for entry in entries:
        name, desc = _pg_of(entry)
        group = groups.setdefault(name, {"name": name, "desc": desc, "ranks": None, "pg_id": None})
        group["desc"] = group["desc"] or desc
        group["pg_id"] = group["pg_id"] if group["pg_id"] is not None else _int(entry.get("pg_id"))
    _lend_unnamed(groups)
    _status(trace, groups)
    return list(groups.values())


def _lend_unnamed(groups: dict[str, dict[str, Any]]) -> None:
    unnamed = groups.get("")
    orphans = [g for name, g in groups.items() if name and g["ranks"] is None]
    if unnamed is not None and unnamed["pg_id"] is None and len(orphans) == 1:
        orphans[0]["ranks"] = unnamed["ranks"]
        orphans[0]["desc"] = orphans[0]["desc"] or unnamed["desc"]
        del groups[""]


def _status(trace: dict[str, Any], groups: dict[str, dict[str, Any]]) -> None:
    status = trace.get("pg_status") if isinstance(trace.get("pg_status"), dict) else {}
    for group in groups.values():
        found = status.get(group["name"])
        if found is None and group["pg_id"] is not None:
            found = status.get(str(group["pg_id"]))
        found = found if isinstance(found, dict) else {}
        for field in ("last_enqueued", "last_started", "last_completed"):
            group[field] = _int(found.get(f"{field}_collective"))


def _pg_of(entry: dict[str, Any]) -> tuple[str, str]:
    pg = entry.get("process_group")
    if isinstance(pg, (list, tuple)) and pg:
        return _str(pg[0]), _str(pg[1]) if len(pg) > 1 else ""
    return _str(entry.get("pg_id")), ""


def _entry(entry: dict[str, Any]) -> dict[str, Any]:
    name, desc = _pg_of(entry)
    profiling = _str(entry.get("profiling_name"))
    backend, sep, op = profiling.partition(":")
    return {"pg_name": name, "pg_desc": desc, "collective_seq_id": _int(entry.get("collective_seq_id")),
            "p2p_seq_id": _int(entry.get("p2p_seq_id")), "op": op if sep else profiling,
            "backend": backend if sep else None, "state": entry.get("state"),
            "input_sizes": _plain(entry.get("input_sizes")),
            "output_sizes": _plain(entry.get("output_sizes")),
            "input_dtypes": _plain(entry.get("input_dtypes")), "frame": user_frame(entry.get("frames"))}


def user_frame(frames: Any) -> str | None:
    """The innermost frame outside torch and the Python library, as `file:line name`."""
    if not isinstance(frames, list):
        return None
    for frame in frames:
        if not isinstance(frame, dict):
            continue
        filename = _str(frame.get("filename"))
        if filename and not _NOT_USER.search(filename):
            return f"{filename}:{frame.get('line')} {frame.get('name')}"
    return None


def _ranks(value: Any) -> list[int] | None:
    """pg_config's ranks: a list, or the string torch writes ("[0, 1, 2, 3]")."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return None
    if isinstance(value, (list, tuple)):
        ranks = [_int(r) for r in value]
        return [r for r in ranks if r is not None]
    return None


def _plain(value: Any) -> Any:
    """Tuples as lists, so a pickle's result reads like the JSON variant's."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _str(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


# -- a live debug server ----------------------------------------------------------------------------


def endpoint_url(value: Any) -> str:
    """The fr_trace_json URL of a worker server on this node; ValueError for anything not local."""
    text = str(value).strip()
    if text.isdigit():
        text = f"127.0.0.1:{text}"
    if "://" not in text:
        text = "http://" + text
    url = urllib.parse.urlsplit(text)
    if url.scheme != "http" or (url.hostname or "") not in _LOCAL_HOSTS:
        raise ValueError(f"endpoint {value!r} refused: only http on this node (127.0.0.1, localhost, ::1)")
    path = url.path if url.path not in ("", "/") else "/handler/fr_trace_json"
    return urllib.parse.urlunsplit(("http", url.netloc, path, url.query, ""))


def _from_endpoint(value: Any, ctx: CheckContext) -> dict[str, Any]:
    try:
        url = endpoint_url(value)
    except ValueError as exc:
        return {"found": False, "reason": str(exc), "searched": [str(value)], "dumps": [], "errors": []}
    base = {"searched": [url], "dumps": [], "errors": []}
    try:  # torch's worker server answers handlers on POST only
        request = urllib.request.Request(url, data=b"", method="POST")
        with urllib.request.urlopen(request, timeout=min(10.0, ctx.remaining())) as answer:  # noqa: S310
            data = answer.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            raise ValueError(f"refused: the answer is over the {MAX_FILE_BYTES:,}-byte limit")
        trace, fmt = parse(data, url if url.endswith("json") else "")
    except (OSError, ValueError) as exc:
        reason = _reason(exc) if not isinstance(exc, urllib.error.URLError) else f"cannot fetch: {exc.reason}"
        return {**base, "found": False, "reason": f"no trace from {url}: {reason}",
                "errors": [{"path": url, "reason": reason}]}
    return {**base, "found": True, "reason": None, "dumps": [describe(trace, url, fmt, None)]}
