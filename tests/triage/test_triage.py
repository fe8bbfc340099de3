"""`runbook triage`: the labelled log corpus, normalisation, streaming, gzip, stdin, JSON, exit codes."""

from __future__ import annotations

import gzip
import io
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from runbook.format.model import Signature
from runbook.library.runbooks import load_library
from runbook.triage.lognorm import join_wrapped, normalize
from runbook.triage.logstream import read_lines
from runbook.triage.scan import Triage, triage
from runbook.triage.verdict import Match

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "tests" / "data" / "logs"
LABELS: dict[str, list[str]] = yaml.safe_load((LOGS / "labels.yaml").read_text("utf-8"))
MIN_HIT_RATE = 0.90
TOP = 3


@pytest.fixture(scope="module")
def library():  # type: ignore[no-untyped-def]
    return load_library([ROOT / "runbooks"])


def triage_file(name: str, library) -> list[Match]:  # type: ignore[no-untyped-def]
    """Triage one corpus log; its leading `# ` lines are metadata, not log."""
    with open(LOGS / name, "rb") as raw:
        body = itertools.dropwhile(lambda line: line.startswith("# "), read_lines(raw))
        return triage(list(body), library)


def taxonomy_of(matches: list[Match], top: int = TOP) -> set[str]:
    return {tid for match in matches[:top] for tid in match.taxonomy}


# ---- the corpus -------------------------------------------------------------------------------


def test_corpus_is_labelled_and_covers_the_taxonomy() -> None:
    files = {p.name for p in LOGS.iterdir() if p.name != "labels.yaml"}
    assert files == set(LABELS), "every log has a label and every label a log"
    assert len(files) >= 45
    taxonomy = yaml.safe_load((ROOT / "engine" / "runbook" / "data" / "taxonomy.yaml").read_text("utf-8"))
    known = {tid for group in taxonomy.values() for tid in group}
    used = {tid for ids in LABELS.values() for tid in ids}
    assert used <= known, used - known
    assert known <= used, f"taxonomy ids without a log: {sorted(known - used)}"
    for name in files:
        with open(LOGS / name, "rb") as raw:
            assert 10 <= sum(1 for _ in read_lines(raw)) <= 80, name


def test_corpus_hit_rate(library) -> None:  # type: ignore[no-untyped-def]
    """For at least 90% of the logs, an expected id is among the taxonomy of the top 3 matches."""
    misses = []
    for name, expected in LABELS.items():
        matches = triage_file(name, library)
        if not taxonomy_of(matches) & set(expected):
            got = [(m.runbook, m.entry, m.taxonomy[:4]) for m in matches[:TOP]]
            misses.append(f"{name}: expected one of {expected}, top {TOP}: {got or 'no match'}")
    rate = 1 - len(misses) / len(LABELS)
    print(f"\ntriage hit rate: {rate:.0%} ({len(LABELS) - len(misses)}/{len(LABELS)})")
    for miss in misses:
        print("  MISS", miss)
    assert rate >= MIN_HIT_RATE, "\n".join(misses)


# (log, runbook that must be loaded, expected first taxonomy id of the best match, its runbook)
KEY_LOGS = [
    ("04-nccl-watchdog-legacy.log", "training-hang", "hang.collective", None),
    ("05-nccl-watchdog-pg-guid.log", "training-hang", "hang.collective", None),
    ("19-dataloader-token-buffer.log", "training-hang", "hang.dataloader", "training-hang"),
    ("57-wrapped-watchdog.log", "training-hang", "hang.collective", None),
    ("59-oom-then-watchdog.log", "cuda-oom", "oom.gpu", "cuda-oom"),
    ("01-cuda-oom-torch2.log", "cuda-oom", "oom.gpu", "cuda-oom"),
    ("06-nccl-shm.log", "nccl-errors", "nccl.system-error", "nccl-errors"),
    ("11-port-in-use.log", "ddp-errors", "launch.port-in-use", "ddp-errors"),
    ("33-unrecognized-args.log", "cli-args", "launch.cli-args", "cli-args"),
    ("22-gkd-waiting-rollout.log", "rlhf-hang", "hang.weight-sync", "rlhf-hang"),
]


@pytest.mark.parametrize(("name", "needs", "first_id", "runbook"), KEY_LOGS,
                         ids=[k[0] for k in KEY_LOGS])
def test_key_logs_exactly(library, name: str, needs: str, first_id: str,  # type: ignore[no-untyped-def]
                          runbook: str | None) -> None:
    if library.get(needs) is None:
        pytest.skip(f"runbook {needs} is not written yet")
    best = triage_file(name, library)[0]
    assert best.taxonomy[0] == first_id, (best.runbook, best.entry, best.taxonomy)
    if runbook:
        assert best.runbook == runbook


def test_a_match_names_one_conclusion_and_its_own_taxonomy(library) -> None:  # type: ignore[no-untyped-def]
    """The watchdog line is evidence for one conclusion (not every id training-hang can reach),
    and a knock-on: the cause is elsewhere."""
    matches = triage(["[rank3]:[E501 12:30:00.123 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught "
                      "collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE) ran for "
                      "1800000 milliseconds before timing out."], library)
    hang = next(m for m in matches if m.runbook == "training-hang")
    assert (hang.entry, hang.conclusion, hang.taxonomy) == (
        "exit-signatures", "crashed-collective-timeout", ["hang.collective"])
    assert hang.role == "knock-on" and hang.title.en == "The NCCL watchdog killed a stuck collective"
    assert hang.lines()[0].line_no == 1 and hang.lines()[0].text.startswith("[rank3]:")
    assert hang.first is not None and hang.first.rank == 3 and hang.first.time == "12:30:00.123"
    for match in matches:
        conclusion = library.get(match.runbook).conclusions[match.conclusion]
        assert match.taxonomy == conclusion.taxonomy[:3]


# ---- ranking ----------------------------------------------------------------------------------

OOM = "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
WATCHDOG = ("[rank0]: [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, "
            "OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.")


def test_the_cause_comes_before_the_knock_ons_that_outnumber_it(library) -> None:  # type: ignore[no-untyped-def]
    """One rank's OOM, then many watchdog timeouts on the others, later and more numerous."""
    matches = triage(["step 1", OOM, *[WATCHDOG] * 40], library)
    assert matches[0].role == "cause" and "oom.gpu" in matches[0].taxonomy
    assert matches[0].first is not None and matches[0].first.rank == 1
    roles = [m.role for m in matches]
    assert roles == sorted(roles, key=lambda r: r != "cause"), "every cause before every knock-on"


def test_among_causes_the_earliest_comes_first(library) -> None:  # type: ignore[no-untyped-def]
    late_oom_first = triage(["error: unrecognized arguments: --foo", "x", OOM], library)
    assert late_oom_first[0].runbook == "cli-args"
    early_oom = triage([OOM, "x", "error: unrecognized arguments: --foo"], library)
    assert "oom.gpu" in early_oom[0].taxonomy


def test_a_specific_signature_beats_a_generic_one_that_comes_earlier(library) -> None:  # type: ignore[no-untyped-def]
    library.get("training-hang").signatures.append(
        Signature(r"Traceback \(most recent call last\)", None, "log-stalled"))
    try:
        lines = ["Traceback (most recent call last):"] * 50 + ['  File "train.py", line 1', OOM]
        matches = Triage(library)
        matches.feed(lines)
        ranked = matches.matches()
    finally:
        library.get("training-hang").signatures.pop()
    generic = next(m for m in ranked if m.conclusion == "log-stalled")
    assert generic.generic and generic.signatures[0].count == 50
    assert ranked.index(generic) > 0 and "oom.gpu" in ranked[0].taxonomy
    assert generic.confidence < ranked[0].confidence
    assert len(generic.signatures[0].lines()) == 6  # first 3 and last 3 kept, however many matched


def test_invalid_signature_is_skipped_with_a_warning(library) -> None:  # type: ignore[no-untyped-def]
    library.get("training-hang").signatures.append(Signature("(unclosed", None))
    try:
        warnings: list[str] = []
        scanner = Triage(library, on_warning=warnings.append)
        scanner.feed(["Token buffer: 10/100"])
    finally:
        library.get("training-hang").signatures.pop()
    assert len(warnings) == 1 and "'(unclosed': not a valid regular expression" in warnings[0]
    assert [m.runbook for m in scanner.matches()][:1] == ["training-hang"]


# ---- normalisation ----------------------------------------------------------------------------


@pytest.mark.parametrize(("line", "expected"), [
    ("[rank3]:[E501 12:00:00.1 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog",
     "[E501 12:00:00.1 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog"),
    ("[default2]:  File \"train.py\", line 3", "File \"train.py\", line 3"),
    ("rank 3: loss nan", "loss nan"),
    ("(TaskRunner pid=133947) Generating train split: 0 examples", "Generating train split: 0 examples"),
    ("(RayWorker pid=1, ip=10.0.0.1) init_model START", "init_model START"),
    ("[1,3]<stderr>:RuntimeError: boom", "RuntimeError: boom"),
    ("2024-05-01 12:00:00,123 - INFO - step 1", "INFO - step 1"),
    ("2024-05-01T12:00:00.123456Z [rank0]: x", "x"),
    ("[2024-05-01 12:00:00] [INFO] x", "[INFO] x"),
    ("[12:00:00] Collecting trajectories...", "Collecting trajectories..."),
    ("May  1 12:00:00 gpu001 kernel: [ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79",
     "NVRM: Xid (PCI:0000:3b:00): 79"),
    ("[Wed May  1 12:00:00 2024] Out of memory: Killed process 4242 (python)",
     "Out of memory: Killed process 4242 (python)"),
    ("gpu001:4242:4300 [3] NCCL INFO NCCL_SOCKET_IFNAME set to ib0",
     "NCCL INFO NCCL_SOCKET_IFNAME set to ib0"),
    ("2024-12-02T08:00:22.001Z stderr F Traceback (most recent call last):",
     "Traceback (most recent call last):"),
    ("\x1b[31mtorch.OutOfMemoryError\x1b[0m: CUDA out of memory",
     "torch.OutOfMemoryError: CUDA out of memory"),
    ("  File \"train.py\", line 3", "  File \"train.py\", line 3"),  # indentation without a prefix stays
    ("(raylet) A worker died", "(raylet) A worker died"),  # not a pid prefix: it says who is talking
    ("sglang-1  | Thread 12816 (idle): \"MainThread\"", "Thread 12816 (idle): \"MainThread\""),  # compose
    ("ib0: link down", "ib0: link down"),
    ("> RuntimeError: NCCL error", "RuntimeError: NCCL error"),  # a Markdown quote
    ("> > [rank0]: torch.OutOfMemoryError: x", "torch.OutOfMemoryError: x"),
    (">>> t.to(cuda0)", ">>> t.to(cuda0)"),  # Python's prompt stays: it says the session is interactive
    ("[pod/trainer-worker-0/pytorch] [rank1]: RuntimeError: x", "RuntimeError: x"),  # kubectl --prefix
    ("RuntimeError: expected &lt;class &#39;torch.Tensor&#39;&gt; &amp;&amp; more",
     "RuntimeError: expected <class 'torch.Tensor'> && more"),  # HTML-escaped page source
    ("&gt; Traceback (most recent call last):", "Traceback (most recent call last):"),
    ("x &amp;lt; y", "x &lt; y"),  # unescaped once
])
def test_normalize(line: str, expected: str) -> None:
    assert normalize(line) == expected


def test_wrapped_and_partial_lines_are_joined() -> None:
    cut = "x" * 100 + "[Rank 7] Watchdog caught collective opera"
    assert len(cut) == 141
    cut = cut[-120:]
    lines = ["first", cut, "tion timeout: WorkNCCL(SeqNum=1)",
             "2024-05-01T00:00:00Z stdout P CUDA out of mem",
             "2024-05-01T00:00:01Z stdout F ory. Tried to allocate", "last"]
    joined = list(join_wrapped(lines))
    assert [(a, b) for a, b, _ in joined] == [(1, 1), (2, 3), (4, 5), (6, 6)]
    assert "collective operation timeout" in joined[1][2]
    assert normalize(joined[2][2]) == "CUDA out of memory. Tried to allocate"
    # a 120-column line followed by an indented traceback line is not joined
    assert len(list(join_wrapped(["y" * 120, "  File \"a.py\""]))) == 2
    # records of a logger that happen to be 160 characters wide (torchtitan/2389 in the corpus)
    # each start as the one before did: they are records of their own, not its rest
    record = "[titan] 2026-02-24 19:46:17,508 - root - INFO - step:  4  loss:  7.62585"
    records = [record.ljust(159, " ") + "%"] * 3
    assert [(a, b) for a, b, _ in join_wrapped(records)] == [(1, 1), (2, 2), (3, 3)]


def test_a_line_cut_inside_a_parenthesis_is_joined_with_the_line_that_closes_it() -> None:
    # sglang#3424 (in the corpus): a paste cut at 209 characters, no terminal width
    head = ("[rank1]:[E210 02:06:33.347835395 ProcessGroupNCCL.cpp:1595] [Rank 1] Watchdog caught "
            "collective operation timeout: WorkNCCL(S")
    rest = "eqNum=1522789, OpType=_ALLGATHER_BASE, Timeout(ms)=600000) ran for 600003 milliseconds"
    assert [(a, b) for a, b, _ in join_wrapped([head, rest, "next"])] == [(1, 2), (3, 3)]
    assert "WorkNCCL(SeqNum=1522789," in next(join_wrapped([head, rest]))[2]
    # a next line that does not close it, or one with a prefix of its own, stays apart
    assert len(list(join_wrapped([head, "eqNum=1, OpType=ALLREDUCE"]))) == 2
    assert len(list(join_wrapped([head, "[rank0]: eqNum=1)"]))) == 2
    # a call that opens a parenthesis at the end of a line is not a cut
    assert len(list(join_wrapped(["model = build(", "x)"]))) == 2


def test_wrapped_log_matches_on_its_first_line(library) -> None:  # type: ignore[no-untyped-def]
    scanner = Triage(library)
    with open(LOGS / "57-wrapped-watchdog.log", "rb") as raw:
        scanner.feed(read_lines(raw))
    hang = next(m for m in scanner.matches() if m.runbook == "training-hang")
    assert [h.line_no for h in hang.lines()] == [7]  # the first of the three pieces
    assert scanner.lines == len((LOGS / "57-wrapped-watchdog.log").read_text("utf-8").splitlines())


# ---- reading: gzip, undecodable bytes, long lines ---------------------------------------------


def test_gzip_is_recognised_by_its_magic_bytes_not_its_name(tmp_path: Path, runbook_cli) -> None:  # type: ignore[no-untyped-def]
    plain = (LOGS / "04-nccl-watchdog-legacy.log").read_bytes()
    hidden = tmp_path / "train.log"  # gzip inside, no .gz suffix
    hidden.write_bytes(gzip.compress(plain))
    result = runbook_cli("triage", str(hidden), "--format", "json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["lines"] == plain.count(b"\n")
    assert report["matches"][0]["taxonomy"][0] == "hang.collective"


def test_undecodable_bytes_and_overlong_lines_are_survived() -> None:
    raw = b"ok \xff\xfe line\n" + b"z" * 200_000 + b"\n" + b"CUDA out of memory\r\nlast"
    lines = list(read_lines(io.BytesIO(raw)))
    assert lines[0] == "ok \ufffd\ufffd line"
    assert len(lines) == 4 and len(lines[1]) <= 65536
    assert lines[2:] == ["CUDA out of memory", "last"]


def test_stdin_plain_and_gzip(runbook_cli) -> None:  # type: ignore[no-untyped-def]
    text = (LOGS / "19-dataloader-token-buffer.log").read_text("utf-8")
    for data in (text.encode(), gzip.compress(text.encode())):
        result = subprocess.run([sys.executable, "-m", "runbook", "triage", "-", "--format", "json"],
                                input=data, capture_output=True, timeout=60, cwd=ROOT,
                                env={**os.environ, "RUNBOOK_LANG": "en"})
        assert result.returncode == 0, result.stderr
        report = json.loads(result.stdout)
        assert report["source"] == "<stdin>"
        assert report["matches"][0]["runbook"] == "training-hang"



def test_pasted_text_triages_as_the_file_does(library) -> None:  # type: ignore[no-untyped-def]
    from runbook.library.kb import load_kb
    from runbook.triage.result import triage_sources, triage_text
    from runbook.triage.sources import expand_inputs

    path = LOGS / "05-nccl-watchdog-pg-guid.log"
    kb = load_kb()
    pasted = triage_text(library, kb, path.read_text("utf-8")).to_json()
    read = triage_sources(library, kb, expand_inputs([str(path)])).to_json()
    assert pasted["source"] == "<pasted>" and pasted["lines"] == read["lines"] > 0
    assert [(m["runbook"], m["conclusion"]["id"]) for m in pasted["matches"]] == [
        (m["runbook"], m["conclusion"]["id"]) for m in read["matches"]]
    assert pasted["verdict"] == read["verdict"] != "no-error"

# ---- streaming a large log in bounded memory --------------------------------------------------


def _noise_chunk() -> bytes:
    """About 1 MB of varied, benign training-log lines (rank prefixes, timestamps, NCCL, Ray, tqdm)."""
    lines = []
    for i in range(7000):
        rank = (i * 7) % 64
        kind = i % 10
        if kind < 6:
            lines.append(f"[rank{rank}]:2024-05-01 12:{i % 60:02d}:{i % 60:02d},{i % 1000:03d} INFO trainer: "
                         f"step {i} | loss {1 + (i % 997) / 500:.4f} | lr 3.00e-04 | grad_norm "
                         f"{(i % 89) / 40:.3f} | tokens/s {100000 + i * 13 % 90000} | mem 61.2GB")
        elif kind < 8:
            lines.append(f"gpu{rank:03d}:{4000 + i % 900}:{5000 + i % 700} [{rank % 8}] NCCL INFO Channel "
                         f"{i % 32:02d}/32 : {rank} {rank + 1} via P2P/IPC/read")
        elif kind < 9:
            lines.append(f"Epoch 3:  {i % 100}%|████      | {i}/60000 [12:03<10:11, 41.20it/s, loss=2.31]")
        else:
            lines.append(f"(RolloutWorker pid={10000 + i}) [2024-05-01 12:00:00] env {i} reset done")
    return ("\n".join(lines) + "\n").encode()


def test_200mb_log_streams_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "huge.log"
    chunk = _noise_chunk()
    size = 0
    with open(path, "wb") as out:
        while size < 200 * 1024 * 1024:
            out.write(chunk)
            size += len(chunk)
        out.write(b"[rank5]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
    expected_lines = size // len(chunk) * chunk.count(b"\n") + 1
    # A fresh interpreter runs triage as its only child, so RUSAGE_CHILDREN is that child alone.
    measure = ("import json, resource, subprocess, sys\n"
               "p = subprocess.run([sys.executable, '-m', 'runbook', 'triage', sys.argv[1], '--format', "
               "'json'], capture_output=True, text=True)\n"
               "print(json.dumps({'rc': p.returncode, 'out': p.stdout, 'err': p.stderr,\n"
               "  'maxrss_kb': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))\n")
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-c", measure, str(path)], capture_output=True, text=True,
                              timeout=120, cwd=ROOT)
    finally:
        path.unlink()  # pytest keeps the last runs' tmp dirs: do not leave 200 MB behind
    elapsed = time.monotonic() - started
    result = json.loads(done.stdout)
    assert result["rc"] == 0, result["err"]
    report = json.loads(result["out"])
    assert report["lines"] == expected_lines
    oom = next(m for m in report["matches"] if "oom.gpu" in m["taxonomy"])
    assert oom["lines"][-1]["line_no"] == expected_lines
    assert result["maxrss_kb"] < 200 * 1024, f"peak RSS {result['maxrss_kb'] / 1024:.0f} MB"
    print(f"\n200 MB log: {elapsed:.1f} s, peak RSS {result['maxrss_kb'] / 1024:.0f} MB")


# ---- the command line -------------------------------------------------------------------------


def test_json_shape(runbook_cli) -> None:  # type: ignore[no-untyped-def]
    log = LOGS / "59-oom-then-watchdog.log"
    result = runbook_cli("triage", str(log), "--format", "json", "--top", "2")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert set(report) == {"schema", "source", "sources", "lines", "notes", "verdict", "summary", "matches",
                           "advice", "differences", "readings"}
    assert report["differences"] == []  # one job's ranks that agree
    assert report["notes"] == []  # an ordinary text log: nothing to say about its shape
    assert report["schema"] == "runbook-triage/v1" and report["source"] == str(log)
    assert report["sources"] == [{"file": str(log), "host": None, "rank": None}]
    assert report["lines"] == len(log.read_text("utf-8").splitlines())
    assert report["verdict"] == "cause" and report["summary"].startswith("rank 6: ")
    assert "GPU memory" in report["summary"]
    assert "(rank 0, 14:32:33.002118) follows from it" in report["summary"]
    assert 1 <= len(report["matches"]) <= 2
    for match in report["matches"]:
        assert {"kind", "runbook", "entry", "conclusion", "taxonomy", "role", "confidence", "score", "why",
                "first", "lines", "signatures"} <= set(match)
        assert set(match["conclusion"]) == {"id", "title", "taxonomy"}
        assert match["taxonomy"] == match["conclusion"]["taxonomy"] and len(match["taxonomy"]) <= 3
        assert 0 < match["confidence"] <= 1 and match["role"] in ("cause", "knock-on")
        assert match["lines"] and all(set(line) == {"file", "line_no", "text", "rank", "host", "time"}
                                      for line in match["lines"])
        assert "line" in match["why"]


def test_text_output_in_both_languages(runbook_cli) -> None:  # type: ignore[no-untyped-def]
    log = str(LOGS / "04-nccl-watchdog-legacy.log")
    english = runbook_cli("triage", log, "--top", "1")
    assert english.returncode == 0
    assert "training-hang" in english.stdout and "lines match 'Watchdog caught" in english.stdout
    assert "runbook run training-hang" in english.stdout
    chinese = runbook_cli("triage", log, "--lang", "zh", "--top", "1")
    assert "行匹配" in chinese.stdout and "训练卡住" in chinese.stdout


def test_exit_codes(tmp_path: Path, runbook_cli) -> None:  # type: ignore[no-untyped-def]
    quiet = tmp_path / "quiet.log"
    quiet.write_text("epoch 1 done\nall good\n")
    nothing = runbook_cli("triage", str(quiet))
    assert nothing.returncode == 1
    said = nothing.stdout.strip().splitlines()
    assert said[:2] == [f"{quiet} (2 lines)",
                        "no error found: no line reads as an error and no signature matches"]
    assert said[3].startswith("what the excerpt lacks: ") and "collect next:" in said  # never silent
    missing = runbook_cli("triage", str(tmp_path / "nope.log"))
    assert missing.returncode == 2 and missing.stdout == ""
    assert missing.stderr.strip() == f"runbook triage: {tmp_path / 'nope.log'}: no such file or directory"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert runbook_cli("triage", str(empty)).returncode == 2
    assert runbook_cli("triage", str(quiet), "--top", "0").returncode == 2


def test_help_stays_light() -> None:
    code = ("import sys, runbook.cli as c\nc.build_parser()\n"
            "print(sorted(m for m in ('yaml', 'jinja2', 'jsonschema') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.stdout.strip() == "[]", out.stderr


def test_fork_and_extension_hazards_name_their_conclusions(library) -> None:  # type: ignore[no-untyped-def]
    """#29: the tokenizers fork warning points at a DataLoader fork deadlock (a knock-on: it warns,
    it does not prove); a CUDA toolkit unlike torch's at an extension build is its own cause."""
    from runbook.triage.result import triage_text

    forked = triage_text(library, None, (
        "epoch 3 | step 1200 | loss 2.31\n"
        "huggingface/tokenizers: The current process just got forked, after parallelism has already "
        "been used. Disabling parallelism to avoid deadlocks...\n")).to_json()
    first = forked["matches"][0]
    assert (first["runbook"], first["conclusion"]["id"]) == ("training-hang", "dataloader-fork-deadlock")
    cuda = triage_text(library, None, (
        "RuntimeError:\n      The detected CUDA version (11.8) mismatches the version that was used to "
        "compile\n      PyTorch (12.4). Please make sure to use the same CUDA versions.\n")).to_json()
    first = cuda["matches"][0]
    assert (first["runbook"], first["conclusion"]["id"]) == ("extension-errors", "extension-cuda-mismatch")


@pytest.mark.parametrize(("line", "conclusion"), [
    # verbatim, from tests/checks/facts/data/xid.yaml's threads
    ("NVRM: Xid (PCI:0000:9b:00): 94, pid=1234, name=python3, Contained ECC error", "ecc-contained"),
    ("NVRM: Xid (PCI:0019:01:00): 149, NETIR Fatal XC0 i0 Link -1 (0x000fe406 0x00000000 0x00000000 "
     "0x00000000 0x00000000 0x00000000)", "nvlink-error"),
    # Xid 45 that names the Xid that caused it is read as that Xid (the driver's kernel_rc.c)
    ("NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused by previous Xid 149",
     "nvlink-error"),
    ("NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001",
     "xid-other"),  # a number with no kind of its own: the last resort
])
def test_an_xid_is_concluded_by_the_kind_its_number_names(library, line: str, conclusion: str) -> None:  # type: ignore[no-untyped-def]
    from runbook.triage.result import triage_text

    result = triage_text(library, None, line + "\n")
    # gpu-driver-hang names 79, 48, 94 and 95 too (the GPU must be reset); gpu-hardware says which kind
    assert [m.conclusion for m in result.matches if m.runbook == "gpu-hardware"][:1] == [conclusion]
    assert result.matches[0].conclusion != "xid-other" or conclusion == "xid-other"


@pytest.mark.parametrize("line", [
    "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -7) local_rank: 0 (pid: 3049) "
    "of binary: /usr/bin/python3",
    "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error. It is possible that "
    "dataloader's workers are out of shared memory.",
])
def test_a_process_ended_by_sigbus_is_shared_memory_dev_shm_could_not_back(library, line: str) -> None:  # type: ignore[no-untyped-def]
    from runbook.triage.result import triage_text

    result = triage_text(library, None, line + "\n")
    top = result.matches[0]
    assert (top.runbook, top.conclusion) == ("cuda-oom", "dataloader-shm-exhausted")
