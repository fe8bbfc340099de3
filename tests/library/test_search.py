"""`runbook search`: runbooks and kb articles, English and Chinese queries, BM25 ranking."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runbook.library.kb import load_kb
from runbook.library.runbooks import load_library
from runbook.library.search import SearchIndex, build_index
from runbook.library.textindex import query_terms, terms

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def index() -> SearchIndex:
    return build_index(load_library([ROOT / "runbooks"]), load_kb([ROOT / "kb"]))


def top_ids(index: SearchIndex, query: str, n: int = 3, lang: str = "en") -> list[str]:
    return [r.id for r in index.search(query, lang, n)]


def present(index: SearchIndex, *ids: str) -> set[str]:
    return {item.id for item in index.items} & set(ids)


# ---- tokenising ------------------------------------------------------------------------------


def test_chinese_is_indexed_as_bigrams_and_unigrams() -> None:
    assert terms("显存不足") == ["显", "存", "不", "足", "显存", "存不", "不足"]
    weights = query_terms("显存不足")
    assert weights["显存"] == 1.0 and weights["显"] < 0.5
    assert query_terms("卡")["卡"] == 1.0  # a one-character query still counts fully


def test_latin_words_are_lowercased_split_and_stemmed() -> None:
    assert terms("nvidia-smi Hangs") == ["nvidia-smi", "nvidia", "smi", "hang"]
    assert terms("NCCL timeouts, nvidia-smi 卡住") == ["nccl", "timeout", "nvidia-smi", "nvidia", "smi",
                                                      "卡", "住", "卡住"]


# ---- queries the brief names -----------------------------------------------------------------


def test_nvidia_smi_hang_in_chinese(index: SearchIndex) -> None:
    wanted = {"gpu-driver-hang", "training-hang", "nvidia-smi-hang-ray-workers"}
    assert set(top_ids(index, "nvidia-smi 卡住", lang="zh")) & wanted


def test_out_of_gpu_memory_in_chinese(index: SearchIndex) -> None:
    expected = "cuda-oom" if present(index, "cuda-oom") else "training-troubleshooting-guide"
    assert expected in top_ids(index, "显存不足", lang="zh")


def test_exploding_gradients_in_chinese(index: SearchIndex) -> None:
    assert set(top_ids(index, "梯度爆炸", lang="zh")) & {"nan-loss", "live-debugging-with-probing"}


def test_nccl_timeout_finds_a_collective_or_nccl_runbook(index: SearchIndex) -> None:
    library = load_library([ROOT / "runbooks"])
    hits = []
    for result in index.search("NCCL timeout", "en", 3):
        runbook = library.get(result.id) if result.kind == "runbook" else None
        if runbook and any(t == "hang.collective" or t.startswith("nccl.")
                           for c in runbook.conclusions.values() for t in c.taxonomy):
            hits.append(result.id)
    assert hits


def test_title_match_ranks_first(index: SearchIndex) -> None:
    assert top_ids(index, "训练卡住", 1, "zh") == ["training-hang"]  # its Chinese title


def test_chinese_query_reaches_english_only_text(index: SearchIndex) -> None:
    """An item found by its Chinese text is shown with its title in --lang en."""
    result = index.search("数据加载器 累积 token", "en", 1)[0]
    assert result.id == "dataloader-token-buffer"
    assert result.title.startswith("Training stuck before the first batch")
    assert result.snippet_lang == "zh"


def test_results_carry_snippet_and_command(index: SearchIndex) -> None:
    results = index.search("Watchdog caught collective operation timeout", "en", 10)
    hang = next(r for r in results if r.id == "training-hang")
    assert hang.kind == "runbook" and hang.command == "runbook run training-hang"
    assert "watchdog" in hang.snippet.lower() and hang.snippet_lang == "en"
    article = next(r for r in index.search("probing backtrace", "en", 10) if r.kind == "kb")
    assert article.command is None and article.path.endswith("en.md")


def test_unknown_word_finds_nothing(index: SearchIndex) -> None:
    assert index.search("xyzzyplugh", "en", 10) == []


# ---- the command line ------------------------------------------------------------------------


def test_cli_json_and_exit_codes(runbook_cli) -> None:  # type: ignore[no-untyped-def]
    found = runbook_cli("search", "显存不足", "--format", "json", "--top", "3", "--lang", "zh")
    assert found.returncode == 0, found.stderr
    report = json.loads(found.stdout)
    assert report["schema"] == "runbook-search/v1" and report["query"] == "显存不足"
    assert 1 <= len(report["results"]) <= 3
    for result in report["results"]:
        assert {"kind", "id", "title", "score", "snippet", "snippet_lang", "path"} <= set(result)
        assert result["kind"] in ("runbook", "kb")
        assert ("command" in result) == (result["kind"] == "runbook")
    nothing = runbook_cli("search", "xyzzyplugh")
    assert nothing.returncode == 1
    assert nothing.stdout.strip() == "no runbook or article matches 'xyzzyplugh'"


def test_cli_text(runbook_cli) -> None:  # type: ignore[no-untyped-def]
    result = runbook_cli("search", "nvidia-smi", "卡住", "--lang", "zh", "--top", "3")
    assert result.returncode == 0
    assert " 1. " in result.stdout and "卡住" in result.stdout


def test_kb_dir_from_environment(tmp_path: Path, runbook_cli) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "kb" / "quokka-notes"
    folder.mkdir(parents=True)
    for lang, title in (("en", "Quokka tuning notes"), ("zh", "短尾矮袋鼠调参笔记")):
        (folder / f"{lang}.md").write_text(f"---\nid: quokka-notes\nlang: {lang}\ntitle: {title}\n"
                                           f"summary: s\ntags: [quokka]\n---\n\n## Body\n\ntext\n", "utf-8")
    result = runbook_cli("search", "quokka", "--format", "json",
                         env={"RUNBOOK_KB_PATH": str(tmp_path / "kb")})
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["results"][0]["id"] == "quokka-notes"
