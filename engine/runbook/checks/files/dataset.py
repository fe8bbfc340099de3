"""`dataset`: training data shards (parquet, JSONL, text): rows, row groups, empty files, document length.

A data loader that packs documents into batch_size x seq_len tokens yields its first batch only
after B*T+1 tokens: with short documents that takes many documents, and the GPUs idle meanwhile.
Parquet footers and samples are read by pyarrow in a child of the node's Python
(`_dataset_worker`, under the check's deadline); JSONL and text files are read here.
"""

from __future__ import annotations

import glob
import math
import os
from typing import Any

from runbook.checks._subpython import run_worker
from runbook.checks.base import CheckContext
from runbook.checks.files import _dataset_worker

NAME = "dataset"
SUMMARY = {
    "en": "Training data files: rows, row groups, empty shards, document length vs the first batch's tokens",
    "zh": "训练数据文件：行数、row group、空分片，以及文档长度与第一个批次所需 token 数的关系",
}
PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "minLength": 1,
                 "description": "Glob, file or directory: *.parquet, *.jsonl(.gz), text files"},
        "text_column": {"type": "string", "minLength": 1, "default": "text",
                        "description": "Column (parquet) or field (JSONL) holding the document text"},
        "sample_rows": {"type": "integer", "minimum": 1, "maximum": 100000, "default": 2000,
                        "description": "Documents sampled, from the first files in sorted order"},
        "tokenizer": {"type": "string", "minLength": 1,
                      "description": "HuggingFace tokenizer name or path (cached; needs transformers)"},
        "batch_size": {"type": "integer", "minimum": 1, "default": 32,
                       "description": "Sequences per batch (per device), B"},
        "seq_len": {"type": "integer", "minimum": 1, "default": 2048,
                    "description": "Tokens per sequence, T"},
        "python": {"type": "string", "minLength": 1,
                   "description": "Interpreter that runs pyarrow (default: the probe's own)"},
    },
    "required": ["path"],
    "additionalProperties": False,
}
_FILE = "{path, size_bytes, rows, row_groups, empty, error}"
RESULT_FIELDS = {
    "available": {"type": "boolean", "en": "The files could be read (false: pyarrow missing for parquet)",
                  "zh": "能读取文件（false：读取 parquet 所需的 pyarrow 不可用）"},
    "reason": {"type": "string", "en": "Why the result is missing or incomplete (null when fine)",
               "zh": "结果缺失或不完整的原因（正常时为 null）"},
    "count": {"type": "integer", "en": "Files matched", "zh": "匹配到的文件数"},
    "total_bytes": {"type": "integer", "en": "Total size of the files", "zh": "文件总大小（字节）"},
    "files": {"type": "array", "en": f"Per file, sorted, at most 200: {_FILE} (rows null = not counted)",
              "zh": f"每个文件一项，按路径排序，最多 200 个：{_FILE}（rows 为 null 表示未统计）"},
    "empty_files": {"type": "integer", "en": "Files of 0 bytes or 0 rows", "zh": "0 字节或 0 行的文件数"},
    "unreadable_files": {"type": "integer", "en": "Files that failed to open (e.g. parquet without a footer)",
                         "zh": "无法打开的文件数（例如缺少 footer 的 parquet）"},
    "pyarrow": {"type": "boolean", "en": "Parquet metadata could be read (null: no parquet files)",
                "zh": "能读取 parquet 元数据（没有 parquet 文件时为 null）"},
    "columns": {"type": "array", "en": "Columns of the first readable parquet file",
                "zh": "第一个可读 parquet 文件的列名"},
    "rows_total": {"type": "integer", "en": "Rows in the files whose rows are known",
                   "zh": "已知行数的文件的总行数"},
    "row_groups_total": {"type": "integer", "en": "Parquet row groups in all files",
                         "zh": "所有文件的 row group 总数"},
    "metadata_complete": {"type": "boolean", "en": "Every parquet footer was read before the deadline",
                          "zh": "在超时前读完了所有 parquet 文件的 footer"},
    "sample_docs": {"type": "integer", "en": "Documents sampled", "zh": "抽样的文档数"},
    "sample_error": {"type": "string", "en": "Why sampling failed for a file (e.g. no such column), or null",
                     "zh": "抽样失败的原因（例如列不存在），或 null"},
    "avg_chars": {"type": "number", "en": "Average characters per document", "zh": "每个文档的平均字符数"},
    "avg_words": {"type": "number", "en": "Average words per document (each CJK character is a word)",
                  "zh": "每个文档的平均词数（每个中日韩字符算一个词）"},
    "avg_tokens": {"type": "number", "en": "Average tokens per document (null without a tokenizer)",
                   "zh": "每个文档的平均 token 数（没有 tokenizer 时为 null）"},
    "tokenizer_error": {"type": "string", "en": "Why the tokenizer could not be used (or null)",
                        "zh": "tokenizer 无法使用的原因（或 null）"},
    "unit": {"type": "string", "en": "Length unit used below: tokens | words",
             "zh": "下面使用的长度单位：tokens | words"},
    "needed_tokens": {"type": "integer", "en": "Tokens the loader buffers before its first batch: B*T+1",
                      "zh": "数据加载器产出第一个批次前需要累积的 token 数：B*T+1"},
    "docs_for_first_batch": {"type": "integer",
                             "en": "Documents needed for the first batch (needed / average)",
                             "zh": "凑满第一个批次需要的文档数（needed / 平均长度）"},
    "short_documents": {"type": "boolean", "en": "Average document under 100 tokens (or words)",
                        "zh": "文档平均长度不足 100 个 token（或词）"},
    "estimated_total": {"type": "integer",
                        "en": "rows_total x average length, in the unit (null if rows unknown)",
                        "zh": "rows_total × 平均长度，单位同 unit（行数未知时为 null）"},
    "fills_first_batch": {"type": "boolean", "en": "All the data holds at least needed_tokens (estimated)",
                          "zh": "全部数据至少有 needed_tokens 个（估算）"},
}
DEFAULT_TIMEOUT = 60.0

SHORT_DOCUMENT = 100
_LIST_MAX = 200


def run(params: dict[str, Any], ctx: CheckContext) -> dict[str, Any]:
    raw = os.path.expanduser(str(params["path"]))
    files = [_entry(p) for p in expand(raw)]
    needed = int(params.get("batch_size") or 32) * int(params.get("seq_len") or 2048) + 1
    result = _blank(files, needed)
    if not files:
        return {**result, "reason": f"no files match {raw}"}
    readable = [f["path"] for f in files if not f["empty"]]
    parquet = [p for p in readable if _dataset_worker.is_parquet(p)]
    if parquet or params.get("tokenizer"):
        data, problem = _ask_worker(params, ctx, readable, parquet)
        if problem is not None:
            return {**result, **problem}
    else:
        data = _read_here(params, readable)
    _merge_files(files, data)
    result.update(_file_totals(files, data, bool(parquet)))
    result.update(_length_fields(data["sample"], result["rows_total"], needed, _all_rows_known(files)))
    result["files"] = files[:_LIST_MAX]
    if parquet and data.get("pyarrow_error"):
        result.update(available=False, reason=f"pyarrow not importable: {data['pyarrow_error']}")
    return result


def expand(path: str) -> list[str]:
    """Regular files matching a glob, in a directory, or the file itself; sorted."""
    if glob.has_magic(path):
        names = glob.glob(path)
    elif os.path.isdir(path):
        names = [os.path.join(path, n) for n in os.listdir(path)]
    else:
        names = [path] if os.path.exists(path) else []
    return sorted(n for n in names if os.path.isfile(n))


def _entry(path: str) -> dict[str, Any]:
    try:
        size = os.path.getsize(path)
    except OSError:
        size = 0
    return {"path": path, "size_bytes": size, "rows": 0 if size == 0 else None,
            "row_groups": None, "empty": size == 0, "error": None}


def _blank(files: list[dict[str, Any]], needed: int) -> dict[str, Any]:
    blank: dict[str, Any] = {name: None for name in RESULT_FIELDS}
    blank.update(available=True, count=len(files), total_bytes=sum(f["size_bytes"] for f in files),
                 files=files[:_LIST_MAX], empty_files=sum(1 for f in files if f["empty"]),
                 unreadable_files=0, needed_tokens=needed, sample_docs=0, columns=[])
    return blank


def _read_here(params: dict[str, Any], paths: list[str]) -> dict[str, Any]:
    """JSONL and text files need no library: sample them in the probe."""
    limit = int(params.get("sample_rows") or 2000)
    texts, sample = _dataset_worker.sample_texts(paths, str(params.get("text_column") or "text"), limit)
    sample.update(_dataset_worker.sample_stats(texts))
    return {"sample": sample, "meta": {}, "meta_complete": True}


def _ask_worker(
    params: dict[str, Any], ctx: CheckContext, readable: list[str], parquet: list[str],
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(worker answer, None) or ({}, result fields saying why there is none)."""
    payload = {"parquet": parquet, "sample": readable,
               "text_column": str(params.get("text_column") or "text"),
               "sample_rows": int(params.get("sample_rows") or 2000), "tokenizer": params.get("tokenizer"),
               "budget_s": max(0.5, ctx.remaining() - 1.0)}
    outcome = run_worker(ctx, _dataset_worker, payload, params.get("python"), needs="pyarrow")
    if outcome.timed_out:
        return {}, {"timed_out": True, "reason": f"reading the data: {outcome.error}"}
    data = outcome.data or {}
    if outcome.error or data.get("error"):
        return {}, {"available": False, "reason": f"data worker failed: {outcome.error or data['error']}"}
    return data, None


# -- assembling the result -----------------------------------------------------------------------


def _merge_files(files: list[dict[str, Any]], data: dict[str, Any]) -> None:
    meta = data.get("meta") or {}
    complete = data["sample"].get("complete") or {}
    for entry in files:
        info = meta.get(entry["path"])
        if info and "error" in info:
            entry["error"] = info["error"]
        elif info:
            entry.update(rows=info["rows"], row_groups=info["row_groups"], empty=info["rows"] == 0)
        elif entry["path"] in complete:
            entry.update(rows=complete[entry["path"]], empty=complete[entry["path"]] == 0)


def _file_totals(files: list[dict[str, Any]], data: dict[str, Any], has_parquet: bool) -> dict[str, Any]:
    known = [f for f in files if f["rows"] is not None]
    counted = len(known) == len(files) or any(f["size_bytes"] > 0 for f in known)  # not just 0-byte files
    groups = [f["row_groups"] for f in files if f["row_groups"] is not None]
    meta = data.get("meta") or {}
    read_meta = has_parquet and data.get("pyarrow_error") is None
    return {
        "empty_files": sum(1 for f in files if f["empty"]),
        "unreadable_files": sum(1 for f in files if f["error"]),
        "pyarrow": read_meta if has_parquet else None,
        "columns": next((m["columns"] for m in meta.values() if "columns" in m), []),
        "rows_total": sum(f["rows"] for f in known) if known and counted else None,
        "row_groups_total": sum(groups) if groups else None,
        "metadata_complete": bool(data.get("meta_complete", True)) if read_meta else None,
    }


def _all_rows_known(files: list[dict[str, Any]]) -> bool:
    return all(f["rows"] is not None or f["error"] for f in files)


def _length_fields(
    sample: dict[str, Any], rows_total: int | None, needed: int, rows_known: bool,
) -> dict[str, Any]:
    docs = int(sample.get("docs") or 0)
    errors = sample.get("errors") or {}
    fields: dict[str, Any] = {"sample_docs": docs, "tokenizer_error": sample.get("tokenizer_error"),
                              "sample_error": _first_error(errors)}
    if docs == 0:
        return fields
    tokens = sample.get("tokens")
    average = tokens / docs if tokens is not None else sample["words"] / docs
    fields.update(
        avg_chars=round(sample["chars"] / docs, 2), avg_words=round(sample["words"] / docs, 2),
        avg_tokens=None if tokens is None else round(tokens / docs, 2),
        unit="words" if tokens is None else "tokens",
        docs_for_first_batch=math.ceil(needed / average) if average > 0 else None,
        short_documents=average < SHORT_DOCUMENT,
    )
    if rows_total is not None and rows_known:
        fields["estimated_total"] = round(rows_total * average)
        fields["fills_first_batch"] = fields["estimated_total"] >= needed
    return fields


def _first_error(errors: dict[str, str]) -> str | None:
    for path, error in sorted(errors.items()):
        return f"{os.path.basename(path)}: {error}"
    return None
