"""The child-process half of the `dataset` check: parquet metadata and document samples.

Runs as `python -c <this source> <payload json>` (see `_subpython`): standard library at module
level, nothing from runbook, pyarrow and transformers imported inside `answer`; Python 3.8 syntax.
The plain-text readers (JSONL, text lines) are standard library, and `dataset` also calls them
in-process when neither pyarrow nor a tokenizer is needed.

Payload: {"parquet": [paths], "sample": [paths, in order], "text_column": str, "sample_rows": int,
          "tokenizer": str | null, "budget_s": float}
Answer:  {"pyarrow_version", "pyarrow_error", "meta": {path: {rows, row_groups, columns} | {error}},
          "meta_complete": bool, "sample": SAMPLE}   (SAMPLE: see `sample_stats`)
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import re
import sys
import time
from collections.abc import Iterator
from typing import Any

MARK = "RUNBOOK-WORKER-RESULT "
PARQUET_EXTS = (".parquet", ".pq")
_CJK = "[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]"
# A word: one CJK character (those scripts put no spaces between words), or a run of other non-space.
_WORD = re.compile(f"{_CJK}|(?:(?!{_CJK})\\S)+")
_BATCH = 1024


def main() -> None:
    start = time.monotonic()
    real_stdout = sys.stdout
    try:
        with contextlib.redirect_stdout(sys.stderr):
            result = answer(json.loads(sys.argv[1]), start)
    except BaseException as exc:  # the parent needs an answer, whatever went wrong
        result = {"error": one_line(exc)}
    real_stdout.write("\n" + MARK + json.dumps(result, default=str) + "\n")
    real_stdout.flush()


def one_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0]}"[:400] if lines else type(exc).__name__


def answer(payload: dict[str, Any], start: float) -> dict[str, Any]:
    result: dict[str, Any] = {"pyarrow_version": None, "pyarrow_error": None, "meta": {},
                              "meta_complete": True}
    pq = None
    if payload.get("parquet"):
        pq, result["pyarrow_version"], result["pyarrow_error"] = import_parquet()
    texts, sample = sample_texts(payload["sample"], payload["text_column"], int(payload["sample_rows"]), pq)
    sample.update(sample_stats(texts, payload.get("tokenizer")))
    result["sample"] = sample
    if pq is not None:
        deadline = start + float(payload.get("budget_s") or 30.0)
        result["meta"], result["meta_complete"] = parquet_meta(pq, payload["parquet"], deadline)
    return result


# -- parquet -------------------------------------------------------------------------------------


def import_parquet() -> tuple[Any, str | None, str | None]:
    """(pyarrow.parquet, pyarrow version, None) or (None, None, why it cannot be imported)."""
    try:
        import pyarrow  # type: ignore[import-untyped,unused-ignore]
        import pyarrow.parquet as parquet  # type: ignore[import-untyped,unused-ignore]
    except Exception as exc:  # ImportError, or a broken install failing to load its libraries
        return None, None, one_line(exc)
    return parquet, str(pyarrow.__version__), None


def parquet_meta(pq: Any, paths: list[str], deadline: float) -> tuple[dict[str, Any], bool]:
    """{path: {rows, row_groups, columns}} from parquet footers, stopping at the deadline."""
    meta: dict[str, Any] = {}
    for path in paths:
        if time.monotonic() > deadline:
            return meta, False
        try:
            info = pq.ParquetFile(path).metadata
            meta[path] = {"rows": int(info.num_rows), "row_groups": int(info.num_row_groups),
                          "columns": [str(n) for n in info.schema.names][:50]}
        except Exception as exc:  # not parquet, truncated (no footer), unreadable
            meta[path] = {"error": one_line(exc)}
    return meta, True


def parquet_texts(pq: Any, path: str, column: str, limit: int) -> Iterator[Any]:
    handle = pq.ParquetFile(path)
    names = list(handle.schema_arrow.names)
    if column not in names:
        raise KeyError(f"no column {column!r} (columns: {', '.join(names[:20])})")
    for batch in handle.iter_batches(batch_size=max(1, min(limit, _BATCH)), columns=[column]):
        yield from batch.column(0).to_pylist()


# -- text files ----------------------------------------------------------------------------------


def is_parquet(path: str) -> bool:
    return path.lower().endswith(PARQUET_EXTS)


def _open_text(path: str) -> Any:
    if path.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


def line_texts(path: str, column: str) -> Iterator[Any]:
    """Documents of a JSONL file (`column` of each object) or of a text file (each non-blank line)."""
    name = path[:-3] if path.endswith(".gz") else path
    jsonl = name.lower().endswith((".jsonl", ".json", ".ndjson"))
    with _open_text(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            if not jsonl:
                yield line
                continue
            try:
                row = json.loads(line)
            except ValueError:
                continue
            yield row.get(column) if isinstance(row, dict) else row


# -- sampling ------------------------------------------------------------------------------------


def sample_texts(
    paths: list[str], column: str, limit: int, pq: Any = None,
) -> tuple[list[str], dict[str, Any]]:
    """Up to `limit` documents from the files in order, with which files were read to the end."""
    texts: list[str] = []
    complete: dict[str, int] = {}
    errors: dict[str, str] = {}
    for path in paths:
        if len(texts) >= limit:
            break
        if is_parquet(path) and pq is None:
            continue
        before = len(texts)
        try:
            rows = parquet_texts(pq, path, column, limit) if is_parquet(path) else line_texts(path, column)
            finished = _take(rows, texts, limit)
        except Exception as exc:  # a bad file must not hide the others
            errors[path] = one_line(exc)
            continue
        if finished and not is_parquet(path):
            complete[path] = len(texts) - before
    return texts, {"complete": complete, "errors": errors}


def _take(rows: Iterator[Any], texts: list[str], limit: int) -> bool:
    """Append text values until `limit`; True when the rows ran out first (the file was read whole)."""
    for value in rows:
        if len(texts) >= limit:
            return False
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        if isinstance(value, str):
            texts.append(value)
    return True


def count_words(text: str) -> int:
    """Whitespace-separated words, each CJK character counted as one word."""
    return len(_WORD.findall(text))


def sample_stats(texts: list[str], tokenizer: str | None = None) -> dict[str, Any]:
    """{docs, chars, words, tokens (null without a tokenizer), tokenizer_error} summed over texts."""
    stats: dict[str, Any] = {"docs": len(texts), "chars": sum(len(t) for t in texts),
                             "words": sum(count_words(t) for t in texts), "tokens": None,
                             "tokenizer_error": None}
    if tokenizer and texts:
        try:
            stats["tokens"] = count_tokens(texts, tokenizer)
        except Exception as exc:  # not installed, not cached (we stay offline), not a tokenizer
            stats["tokenizer_error"] = one_line(exc)
    return stats


def count_tokens(texts: list[str], name: str) -> int:
    """Tokens by a HuggingFace tokenizer, offline: a diagnosis must not start downloads."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from transformers import AutoTokenizer  # type: ignore[import-not-found,unused-ignore]

    tok = AutoTokenizer.from_pretrained(name)
    total = 0
    for i in range(0, len(texts), 256):
        total += sum(len(ids) for ids in tok(texts[i:i + 256], add_special_tokens=False)["input_ids"])
    return total


if __name__ == "__main__":
    main()
