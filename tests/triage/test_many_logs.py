"""Triage of many logs at once, and triage that never goes silent or slow: a directory of rank
logs, the cause before its knock-ons, GBK logs, errors no signature knows, and a pattern that
would backtrack forever in Python's `re`."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from runbook.format.loader import load_text
from runbook.library.kb import load_kb
from runbook.library.runbooks import load_library
from runbook.triage.result import triage_sources
from runbook.triage.sources import Source, expand_inputs, line_rank, line_time

ROOT = Path(__file__).resolve().parents[2]
MULTI = ROOT / "tests" / "data" / "triage-multi"
WATCHDOG = ("[rank2]:[E1126 10:10:02.212345 ProcessGroupNCCL.cpp:616] [Rank 2] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=4412, OpType=ALLREDUCE) ran for 1800087 milliseconds "
            "before timing out.")


@pytest.fixture(scope="module")
def library():  # type: ignore[no-untyped-def]
    return load_library([ROOT / "runbooks"])


def _triage(library, *paths: Path):  # type: ignore[no-untyped-def]
    return triage_sources(library, load_kb(), expand_inputs([str(p) for p in paths]), on_warning=print)


def test_a_directory_of_rank_logs_names_the_first_cause_with_its_file_rank_and_host(library) -> None:  # type: ignore[no-untyped-def]
    result = _triage(library, MULTI)
    assert [s.path for s in result.sources] == [str(MULTI / p) for p in (
        "node-a/rank0.log", "node-a/rank1.log", "node-b/rank2.log", "node-b/rank3.log.gz")]
    first = result.matches[0]
    assert result.verdict == "cause" and first.role == "cause" and "oom.gpu" in first.taxonomy
    line = first.first
    assert line is not None
    assert (line.source.path, line.source.host, line.rank) == (str(MULTI / "node-a/rank1.log"), "node-a", 1)
    assert line.time == "2026-11-26 09:39:10"  # from the line above it: the OOM line has none
    knock_ons = [m for m in result.matches if m.role == "knock-on"]
    assert knock_ons and all("hang.collective" in m.taxonomy for m in knock_ons)
    files = {hit.source.path for m in knock_ons for hit in m.signatures}
    assert str(MULTI / "node-b/rank3.log.gz") in files, "the gzipped rank log was read"
    summary = result.summary("en")
    assert summary.startswith("rank 1 on node-a: ") and "09:39:10" in summary
    assert "follows from it" in summary and "10:10:00" in summary


def test_the_order_of_the_files_does_not_decide_which_cause_comes_first(library, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Two causes in two files: the earlier clock wins, not the file read first."""
    (tmp_path / "a-late.log").write_text("2026-11-26 11:00:00 INFO x\nerror: unrecognized arguments: --foo\n")
    (tmp_path / "b-early.log").write_text(
        "2026-11-26 09:00:00 INFO x\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB\n")
    result = _triage(library, tmp_path)
    assert "oom.gpu" in result.matches[0].taxonomy
    assert result.matches[0].first.source.path.endswith("b-early.log")  # type: ignore[union-attr]


def test_many_files_on_the_command_line_and_the_json_report(runbook_cli) -> None:  # type: ignore[no-untyped-def]
    done = runbook_cli("triage", str(MULTI / "node-b"), str(MULTI / "node-a" / "rank1.log"),
                       "--format", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["source"] is None and len(report["sources"]) == 3
    assert {"file": str(MULTI / "node-b" / "rank2.log"), "host": "node-b", "rank": 2} in report["sources"]
    first = report["matches"][0]
    assert first["role"] == "cause" and first["first"]["rank"] == 1
    assert first["first"]["file"] == str(MULTI / "node-a" / "rank1.log")
    assert first["first"]["host"] == "node-a"
    text = runbook_cli("triage", str(MULTI))
    assert text.returncode == 0 and "node-a/rank1.log:14 │" in text.stdout


def test_only_knock_ons_say_the_cause_is_elsewhere(library, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "rank2.log"
    log.write_text(WATCHDOG + "\n")
    result = _triage(library, log)
    assert result.verdict == "knock-on" and all(m.role == "knock-on" for m in result.matches)
    assert "this is a consequence: the cause is earlier, or on another rank" in result.summary("en")
    assert "training-hang" in result.summary("en") and "根因更早" in result.summary("zh")


def test_a_gbk_log_is_triaged(library, tmp_path: Path, runbook_cli) -> None:  # type: ignore[no-untyped-def]
    """Written on a Chinese-locale machine: GBK bytes, a Chinese error message."""
    log = tmp_path / "train-gbk.log"
    log.write_bytes("2026-11-26 09:00:00 训练开始\nRuntimeError: 显存不足，无法分配 2.00 GiB\n".encode("gbk"))
    result = _triage(library, log)
    assert "oom.gpu" in result.matches[0].taxonomy
    assert result.matches[0].first.text == "RuntimeError: 显存不足，无法分配 2.00 GiB"  # type: ignore[union-attr]
    assert any("GB18030" in note for note in result.notes)
    done = runbook_cli("triage", str(log), "--format", "json")
    assert json.loads(done.stdout)["matches"][0]["first"]["text"].endswith("无法分配 2.00 GiB")


def test_an_error_no_signature_knows_gets_similar_conclusions_not_silence(library, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "odd.log"
    log.write_text("step 1 loss 2.3\nstep 2 loss 2.2\nTraceback (most recent call last):\n"
                   '  File "train.py", line 9, in <module>\n'
                   "ValueError: InfiniBand port mlx5_0 is down, the network link has no carrier\n")
    result = _triage(library, log)
    assert result.verdict == "similar" and result.matches
    assert all(m.role == "similar" and m.confidence <= 0.3 for m in result.matches)
    best = result.matches[0]
    assert best.similar_to is not None and best.similar_to.line_no == 5
    assert {"hardware.nic", "nccl.network"} & set(best.taxonomy)
    assert "similar, not a known signature" in best.why("en")


def test_no_error_at_all_says_so(library, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A steady loss and no error: the verdict names no failure, and the one answer is that the numbers
    look well (role `healthy`), not a resemblance of the last lines' words."""
    log = tmp_path / "fine.log"
    log.write_text("".join(f"step {i} | loss {2 - i / 100:.2f} | lr 3e-4\n" for i in range(50)))
    result = _triage(library, log)
    assert result.verdict == "no-error"
    answers = [(m.runbook, m.conclusion, m.role) for m in result.matches]
    assert answers == [("training-hang", "healthy", "healthy")]
    assert "2 → 1.51 over 50 values" in result.matches[0].why("en")
    assert result.advice is not None and not result.advice.closest  # the numbers were read: no guess


def test_no_error_and_no_numbers_gets_no_answer_of_health(library, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "quiet.log"
    log.write_text("INFO loading shards\nINFO building the model\nINFO starting the trainer\n")
    result = _triage(library, log)
    assert result.verdict in ("no-error", "knock-on") and all(m.role != "healthy" for m in result.matches)


def test_a_catastrophic_pattern_runs_in_linear_time(tmp_path: Path, runbook_cli) -> None:  # type: ignore[no-untyped-def]
    """`(a|aa)+$` backtracks exponentially in Python's re on 'aaaa...b'; on RE2 it is linear."""
    runbook = (ROOT / "runbooks" / "nan-loss.yaml").read_text(encoding="utf-8")
    signature = "  - {pattern: '(a|aa)+$', goto: read-log, conclusion: loss-diverged}\n"
    runbook = runbook.replace("id: nan-loss", "id: backtrack", 1)
    runbook = runbook.replace("signatures:\n", "signatures:\n" + signature, 1)
    path = tmp_path / "books"
    path.mkdir()
    (path / "backtrack.yaml").write_text(runbook, encoding="utf-8")
    assert load_text(runbook, "backtrack.yaml").ok
    log = tmp_path / "evil.log"
    log.write_text(("a" * 60_000 + "b\n") * 20)
    started = time.monotonic()
    done = runbook_cli("triage", str(log), "--format", "json", env={"RUNBOOK_PATH": str(path)}, timeout=120)
    elapsed = time.monotonic() - started
    assert done.returncode in (0, 1), done.stderr
    assert elapsed < 60, f"{elapsed:.1f} s"  # bounds a hang only; it takes about a second


@pytest.mark.parametrize(("pattern", "why"), [
    (r"(?<=NCCL )WARN", "RE2 (linear-time matching) cannot take it"),
    (r"(\w+) \1", "RE2 (linear-time matching) cannot take it"),
    (r"\ANCCL WARN", "\\A, \\Z and \\z"),
    (r"(?s)NCCL.WARN", "(?s), (?m) or (?x)"),
    (r"[[:alpha:]]+Error", "POSIX classes"),
])
def test_lint_refuses_patterns_re2_or_javascript_read_differently(pattern: str, why: str) -> None:
    signature = f"  - {{pattern: '{pattern}', goto: read-log, conclusion: loss-diverged}}\n"
    runbook = (ROOT / "runbooks" / "nan-loss.yaml").read_text(encoding="utf-8").replace(
        "signatures:\n", "signatures:\n" + signature, 1)
    problems = [str(p) for p in load_text(runbook, "nan-loss.yaml").problems if p.severity == "error"]
    assert len(problems) == 1 and "signatures[0].pattern" in problems[0] and why in problems[0], problems


def test_a_signature_must_name_an_existing_conclusion() -> None:
    signature = "  - {pattern: 'loss is nan', goto: read-log, conclusion: loss-divergd}\n"
    runbook = (ROOT / "runbooks" / "nan-loss.yaml").read_text(encoding="utf-8").replace(
        "signatures:\n", "signatures:\n" + signature, 1)
    problems = [str(p) for p in load_text(runbook, "nan-loss.yaml").problems]
    assert any("no conclusion named 'loss-divergd'" in p and "loss-diverged" in p for p in problems), problems
    unnamed = (ROOT / "runbooks" / "nan-loss.yaml").read_text(encoding="utf-8").replace(
        "signatures:\n", "signatures:\n  - {pattern: 'loss is nan', goto: read-log}\n", 1)
    warnings = [p for p in load_text(unnamed, "nan-loss.yaml").problems if p.severity == "warning"]
    assert any("names no conclusion" in p.message for p in warnings)


@pytest.mark.parametrize(("line", "rank", "time"), [
    ("[rank3]:[E1126 10:10:02.1 ProcessGroupNCCL.cpp:616] x", 3, "10:10:02.1"),
    ("[default5]:2026-11-26 09:39:10,123 ERROR x", 5, "2026-11-26 09:39:10.123"),
    ("[1,7]<stderr>:RuntimeError: boom", 7, None),
    ("12: srun task says hi", 12, None),
    ("(pid=4242, ip=10.0.0.1) worker died", None, None),
])
def test_rank_and_time_of_a_line(line: str, rank: int | None, time: str | None) -> None:
    assert line_rank(line) == rank and line_time(line) == time


def test_host_and_rank_from_the_file_names(tmp_path: Path) -> None:
    for name in ("node-a/rank_3.log", "node-b/worker-12.err", "gpu07.log", "notes.md"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x\n")
    sources = {Path(s.path).name: s for s in expand_inputs([str(tmp_path)])}
    assert set(sources) == {"rank_3.log", "worker-12.err", "gpu07.log"}
    assert (sources["rank_3.log"].host, sources["rank_3.log"].rank) == ("node-a", 3)
    assert (sources["worker-12.err"].host, sources["worker-12.err"].rank) == ("node-b", 12)
    assert sources["gpu07.log"].rank == 7  # `gpu07`: a GPU index names the rank's file
    assert Source("<stdin>").host is None
