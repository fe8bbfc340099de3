"""`dataset` against real parquet shards written by pyarrow, and JSONL/text files."""

from __future__ import annotations

import gzip
import json
import math
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from runbook.checks.files import _dataset_worker, dataset

WORDS = ("the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "while", "data", "loaders",
         "wait")


def docs(count: int, words: int, seed: int = 0) -> list[str]:
    """`count` documents of exactly `words` words each."""
    return [" ".join(WORDS[(seed + i + j) % len(WORDS)] for j in range(words)) for i in range(count)]


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three shards of 300 ten-word documents in row groups of 100, an empty shard, a 0-byte file."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    root = tmp_path_factory.mktemp("parquet_shards")
    for index in range(3):
        table = pa.table({"text": docs(300, 10, seed=index), "id": list(range(300))})
        pq.write_table(table, root / f"shard_{index:05d}.parquet", row_group_size=100)
    pq.write_table(pa.table({"text": pa.array([], pa.string()), "id": pa.array([], pa.int64())}),
                   root / "shard_00003.parquet")
    (root / "shard_00004.parquet").write_bytes(b"")
    return root


def check(params: dict[str, Any], make_ctx: Any, timeout: float = 60.0) -> dict[str, Any]:
    result = dataset.run(params, make_ctx(timeout))
    assert set(result) <= set(dataset.RESULT_FIELDS) | {"timed_out"}
    return result


def test_parquet_shards_of_short_documents(shards: Path, make_ctx) -> None:
    result = check({"path": str(shards / "*.parquet")}, make_ctx)
    assert result["available"] is True and result["reason"] is None and result["pyarrow"] is True
    assert result["count"] == 5
    assert result["total_bytes"] == sum(p.stat().st_size for p in shards.glob("*.parquet"))
    files = {Path(f["path"]).name: f for f in result["files"]}
    assert [f["rows"] for f in result["files"]] == [300, 300, 300, 0, 0]
    assert [files[f"shard_0000{i}.parquet"]["row_groups"] for i in range(3)] == [3, 3, 3]
    assert files["shard_00003.parquet"]["empty"] is True and files["shard_00004.parquet"]["empty"] is True
    assert result["empty_files"] == 2 and result["unreadable_files"] == 0
    assert result["rows_total"] == 900 and result["row_groups_total"] >= 9
    assert result["metadata_complete"] is True and result["columns"] == ["text", "id"]
    assert result["sample_docs"] == 900  # fewer rows than sample_rows: all of them
    assert result["avg_words"] == 10.0 and result["avg_tokens"] is None and result["unit"] == "words"
    assert result["needed_tokens"] == 32 * 2048 + 1 == 65537
    assert result["docs_for_first_batch"] == math.ceil(65537 / 10) == 6554
    assert result["short_documents"] is True  # seed 000: short documents delay the first batch
    assert result["estimated_total"] == 9000 and result["fills_first_batch"] is False


def test_sample_rows_batch_and_sequence(shards: Path, make_ctx) -> None:
    result = check({"path": str(shards / "*.parquet"), "sample_rows": 450, "batch_size": 4,
                    "seq_len": 16}, make_ctx)
    assert result["sample_docs"] == 450  # all of shard 0 and half of shard 1
    assert result["needed_tokens"] == 65 and result["docs_for_first_batch"] == 7
    assert result["fills_first_batch"] is True


def test_wrong_text_column_and_unreadable_shard(shards: Path, tmp_path: Path, make_ctx) -> None:
    shutil.copy(shards / "shard_00000.parquet", tmp_path / "a.parquet")
    (tmp_path / "b.parquet").write_bytes(b"PAR1 cut short while converting")
    result = check({"path": str(tmp_path), "text_column": "content"}, make_ctx)
    assert result["count"] == 2 and result["unreadable_files"] == 1
    assert result["files"][1]["error"].startswith("ArrowInvalid")
    assert result["sample_docs"] == 0 and result["short_documents"] is None
    assert result["sample_error"].startswith("a.parquet: KeyError")
    assert "no column 'content'" in result["sample_error"] and "text, id" in result["sample_error"]


def _python_without_pyarrow() -> str | None:
    for candidate in ("/usr/bin/python3", shutil.which("python3")):
        if candidate and subprocess.run([candidate, "-c", "import pyarrow"], capture_output=True,
                                        timeout=60).returncode != 0:
            return candidate
    return None


def test_pyarrow_missing_is_unavailable_not_an_error(shards: Path, make_ctx) -> None:
    python = _python_without_pyarrow()
    if python is None:
        pytest.skip("every python here has pyarrow")
    result = check({"path": str(shards / "*.parquet"), "python": python}, make_ctx)
    assert result["available"] is False and result["pyarrow"] is False
    assert result["reason"].startswith("pyarrow not importable: ModuleNotFoundError")
    assert result["count"] == 5 and result["empty_files"] == 1  # the 0-byte file, seen without pyarrow
    assert result["rows_total"] is None and result["sample_docs"] == 0


def test_jsonl_text_and_gzip_need_no_library(tmp_path: Path, make_ctx) -> None:
    rows = [{"content": d} for d in docs(50, 200)] + [{"other": 1}, "not an object"]
    (tmp_path / "a.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n{broken\n")
    with gzip.open(tmp_path / "b.jsonl.gz", "wt") as f:
        f.write("\n".join(json.dumps({"content": d}) for d in docs(30, 200)))
    result = check({"path": str(tmp_path / "*.jsonl*"), "text_column": "content"}, make_ctx)
    assert result["pyarrow"] is None and result["available"] is True
    assert [f["rows"] for f in result["files"]] == [51, 30]  # the bare string is a document too
    assert result["rows_total"] == 81 and result["sample_docs"] == 81
    assert result["short_documents"] is False
    text = tmp_path / "lines.txt"
    text.write_text("一个很短的中文文档\n\n" + "\n".join(docs(9, 5)) + "\n")
    lines = check({"path": str(text), "sample_rows": 5}, make_ctx)
    assert lines["sample_docs"] == 5 and lines["files"][0]["rows"] is None  # not read to the end
    assert lines["avg_words"] == (9 + 4 * 5) / 5


def test_count_words_counts_each_cjk_character() -> None:
    assert _dataset_worker.count_words("hello world") == 2
    assert _dataset_worker.count_words("数据加载器 loads 数据") == 5 + 1 + 2
    assert _dataset_worker.count_words("  ") == 0


def test_tokenizer_without_transformers_falls_back_to_words(tmp_path: Path, make_ctx) -> None:
    (tmp_path / "d.jsonl").write_text("\n".join(json.dumps({"text": d}) for d in docs(20, 10)))
    result = check({"path": str(tmp_path / "d.jsonl"), "tokenizer": "gpt2"}, make_ctx)
    assert result["sample_docs"] == 20 and result["avg_words"] == 10.0
    if result["avg_tokens"] is None:  # transformers missing, or gpt2 not cached (we stay offline)
        assert result["unit"] == "words" and result["tokenizer_error"]
    else:
        assert result["unit"] == "tokens" and result["docs_for_first_batch"] > 0


def test_no_files_and_a_hanging_reader(tmp_path: Path, make_ctx) -> None:
    none = check({"path": str(tmp_path / "*.parquet")}, make_ctx)
    assert none["count"] == 0 and none["reason"].startswith("no files match")
    (tmp_path / "a.parquet").write_bytes(b"PAR1")
    sleeper = tmp_path / "python"
    sleeper.write_text("#!/bin/sh\nsleep 30\n")
    sleeper.chmod(sleeper.stat().st_mode | stat.S_IXUSR)
    start = time.monotonic()
    hung = check({"path": str(tmp_path / "*.parquet"), "python": str(sleeper)}, make_ctx, timeout=1.5)
    assert time.monotonic() - start < 5
    assert hung["timed_out"] is True and "killed" in hung["reason"] and hung["count"] == 1


def test_tokenizer_counts_tokens(tmp_path: Path, make_ctx) -> None:
    pytest.importorskip("transformers")
    tokenizers = pytest.importorskip("tokenizers")
    from transformers import PreTrainedTokenizerFast

    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(WORDS)}}
    model = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    model.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=model, unk_token="[UNK]").save_pretrained(tmp_path / "tok")
    (tmp_path / "d.jsonl").write_text(json.dumps({"text": "the quick brown fox, jumps"}) + "\n")
    result = check({"path": str(tmp_path / "d.jsonl"), "tokenizer": str(tmp_path / "tok")}, make_ctx)
    assert result["tokenizer_error"] is None and result["unit"] == "tokens"
    assert result["avg_words"] == 5.0 and result["avg_tokens"] == 6.0  # the comma is a token
    assert result["docs_for_first_batch"] == math.ceil(65537 / 6)


def test_worker_runs_from_the_probe_bundle(shards: Path, tmp_path: Path) -> None:
    """Nodes run the probe as a zipapp: the worker's source must still reach the child Python."""
    from runbook.transports.bundle import bundle_bytes

    bundle = tmp_path / "probe.pyz"
    bundle.write_bytes(bundle_bytes())
    request = {"check": "dataset", "with": {"path": str(shards / "*.parquet")}, "timeout": 30}
    done = subprocess.run([sys.executable, str(bundle)], input=json.dumps(request), capture_output=True,
                          text=True, timeout=60)
    result = json.loads(done.stdout)["result"]
    assert result["pyarrow"] is True and result["rows_total"] == 900
