"""Never an empty answer: a triage that names no cause says what the excerpt lacks, what to
collect next, and (with no error line) what it resembles."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from runbook.library.kb import load_kb
from runbook.library.runbooks import load_library
from runbook.triage.advice import advise, shape_of
from runbook.triage.advice_rules import ADVICE
from runbook.triage.cases import KnownCases
from runbook.triage.result import triage_text

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "triage-corpus"


@pytest.fixture(scope="module")
def library_and_kb():  # type: ignore[no-untyped-def]
    return load_library([ROOT / "runbooks"]), load_kb()


@pytest.mark.parametrize(("lines", "verdict", "shape"), [
    ([], "no-error", "empty"),
    (["", "   "], "no-error", "empty"),
    (["[rank0]: Traceback (most recent call last):", '  File "train.py", line 41, in <module>'],
     "similar", "cut-in-traceback"),
    (['Thread 0x7F3A2B1C0740 (idle): "MainThread"', "    wait (threading.py:320)"], "no-error", "stack-dump"),
    (["Current thread 0x00007f1e (most recent call first):", '  File "x.py", line 3 in f'],
     "no-error", "stack-dump"),
    (["FrobnicatorError: the widget was refused"], "similar", "error-unknown"),
    (["step 1 loss 2.0", "step 2 loss 1.9", "saving checkpoint"], "no-error", "metrics-only"),
    (["step 1 loss 2.0", "loading shards", "init done", "connected"], "no-error", "info-only"),
])
def test_shapes(lines: list[str], verdict: str, shape: str) -> None:
    assert shape_of(lines, verdict) == shape


def test_a_cause_needs_no_advice() -> None:
    assert advise(["x"], "cause") is None and advise(["x"], "knock-on") is None


def test_every_shape_names_collect_entries_that_exist_in_both_languages() -> None:
    assert ADVICE["shapes"][-1]["test"] == "always"
    for shape in ADVICE["shapes"]:
        assert set(shape["text"]) == {"en", "zh"} and shape["collect"], shape["id"]
        assert all(key in ADVICE["collect"] for key in shape["collect"]), shape["id"]
    for key, item in ADVICE["collect"].items():
        assert set(item["why"]) == {"en", "zh"} and item["command"], key
    assert json.loads(json.dumps(ADVICE)) == ADVICE  # the page reads the same object


def test_a_quiet_excerpt_gets_what_it_lacks_what_to_collect_and_what_it_resembles(library_and_kb) -> None:
    library, kb = library_and_kb
    text = (CORPUS / "colossalai" / "4537-llama2-7b-gemini-oom-init-memory.log").read_text()
    result = triage_text(library, kb, text)
    assert result.verdict == "no-error" and result.matches == []
    advice = result.to_json()["advice"]
    assert advice["shape"] == "info-only"
    assert [c["id"] for c in advice["collect"]] == ["tail", "nccl-debug", "py-spy"]
    assert advice["collect"][2]["instead"] == "runbook run training-hang --nodes HOSTS"
    closest = advice["closest"]
    assert 1 <= len(closest) <= ADVICE["closest"]["top"]
    # "CUDA memory" in the excerpt: an out-of-memory conclusion is among the closest, with its words
    oom = [c for c in closest if "memory" in c["shared_words"]]
    assert oom and all(library.get(c["runbook"]).conclusions[c["conclusion"]] for c in closest)
    assert all(w.isalpha() and len(w) >= 3 for c in closest for w in c["shared_words"])


def test_an_unknown_error_gets_advice_without_repeating_the_similar_matches(library_and_kb) -> None:
    library, kb = library_and_kb
    result = triage_text(library, kb, "[rank2]: FrobnicatorError: the frobnicator refused the widget\n")
    assert result.verdict == "similar"
    assert result.advice is not None and result.advice.shape == "error-unknown"
    assert result.advice.closest == []  # the similar matches are the comparison


def test_pasted_corpus_answers_say_something(library_and_kb) -> None:
    """A log pasted as text (the MCP server's path) gets an answer too; every file read from disk
    is checked by tests/triage/test_corpus.py, so a sample of them here."""
    library, kb = library_and_kb
    for log in sorted(CORPUS.glob("*/*.log"))[::10]:
        result = triage_text(library, kb, log.read_text(encoding="utf-8", errors="replace"))
        assert result.matches or result.advice, log.name


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_cli_prints_the_advice(lang: str, tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("[rank0]: Traceback (most recent call last):\n"
                   '[rank0]:   File "train.py", line 41, in <module>\n', encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "runbook", "triage", "--lang", lang, str(log)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    head = "内容缺少什么：" if lang == "zh" else "what the excerpt lacks: "
    assert head + ADVICE["shapes"][1]["text"][lang] in out.stdout, out.stdout
    assert "grep -n -A 60 'Traceback (most recent call last)' LOG | tail -n 80" in out.stdout
    assert "python -m torch.utils.collect_env" in out.stdout


CUT_IN_RENDEZVOUS = """Traceback (most recent call last):
  File "/opt/conda/lib/python3.10/site-packages/torch/distributed/run.py", line 919, in main
    run(args)
  File "/opt/conda/lib/python3.10/site-packages/torch/distributed/elastic/rendezvous/dynamic_rendezvous.py", \
line 1110, in next_rendezvous
"""


def test_a_cut_traceback_is_compared_by_its_library_frames(library_and_kb) -> None:
    """Where the traceback was cut says what the program did: torch's rendezvous frames resemble
    the rendezvous; a frame of the user's own script (its path, `main`) resembles nothing, and the
    answer says so instead of a conclusion chosen by the words of a home directory."""
    library, kb = library_and_kb
    rendezvous = triage_text(library, kb, CUT_IN_RENDEZVOUS, "paste")
    assert rendezvous.verdict == "similar"
    assert rendezvous.matches[0].conclusion == "rendezvous-incomplete"
    # https://github.com/hpcaitech/ColossalAI/issues/4343, its last lines
    own = ('Traceback (most recent call last):\n'
           '  File "/home/z00621429/ColossalAI/examples/images/resnet/train.py", line 204, in <module>\n'
           '    main()\n'
           '  File "/home/z00621429/ColossalAI/examples/images/resnet/train.py", line 127, in main\n')
    # (that report's own lines: its known case would find it, see test_known_cases.py)
    result = triage_text(library, kb, own, "paste", cases=KnownCases.empty())
    assert (result.verdict, result.matches) == ("similar", [])
    assert "resembles no known conclusion" in result.summary()
    assert result.advice is not None and result.advice.shape == "cut-in-traceback"
