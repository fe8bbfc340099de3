"""The site's triage page in a real headless Chromium, checked against `runbook triage`.

The site is built once (`runbook site build --no-search`) and its pages opened from file://,
so nothing can be served to them: the page must work offline. The Python triage
(runbook.triage.result.triage_sources) runs on the same logs in the test, so the page's
JavaScript and the CLI are checked against each other, not against ids written here.
"""

from __future__ import annotations

import copy
import gzip
import json
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from runbook.library.kb import load_kb
from runbook.library.runbooks import load_library
from runbook.triage.advice import shape_of
from runbook.triage.lognorm import normalize
from runbook.triage.ranking import RANKING
from runbook.triage.readings import releases
from runbook.triage.readings.series import describe_reading
from runbook.triage.result import TriageResult, triage_sources
from runbook.triage.sources import Source
from runbook.triage.verdict import CAUSE, KNOCK_ON
from tests.site.headless import WAIT_S, browser_marks, chromium
from tests.triage.logends_examples import EXAMPLES as LOGENDS_EXAMPLES
from tests.triage.series_examples import EXAMPLES
from tests.triage.stack_examples import EXAMPLES as STACK_EXAMPLES
from tests.triage.topology_examples import EXAMPLES as TOPOLOGY_EXAMPLES

ROOT = Path(__file__).resolve().parents[2]
LOGS = sorted((ROOT / "tests" / "data" / "logs").glob("*.log*"))
CORPUS = ROOT / "tests" / "data" / "triage-corpus"

try:
    from selenium import webdriver
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:  # pragma: no cover - the dev extra installs it
    webdriver = None

pytestmark = browser_marks()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("triage-site")
    build = subprocess.run([sys.executable, "-m", "runbook", "site", "build", "-o", str(out), "--no-search"],
                           cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    return out


@pytest.fixture(scope="module")
def exported(site: Path) -> dict[str, Any]:
    return json.loads((site / "static" / "triage" / "signatures.json").read_text("utf-8"))


@pytest.fixture(scope="module")
def library_and_kb() -> tuple[Any, Any]:
    return load_library(), load_kb()


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    driver = chromium()
    yield driver
    driver.quit()


def log_text(path: Path) -> str:
    data = path.read_bytes()
    return (gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data).decode("utf-8", "replace")


def open_page(driver: webdriver.Chrome, site: Path, lang: str) -> None:
    url = (site / lang / "triage" / "index.html").as_uri()
    if driver.current_url != url:
        driver.get(url)
    WebDriverWait(driver, WAIT_S).until(lambda d: d.execute_script("return !!window.runbookTriage"))


def page_triage(driver: webdriver.Chrome, site: Path, lang: str, text: str) -> dict[str, Any]:
    """Paste `text`, press the button, and read what the page shows."""
    open_page(driver, site, lang)
    driver.execute_script("document.getElementById('triage-status').removeAttribute('data-verdict');"
                          "document.getElementById('triage-input').value = arguments[0];", text)
    driver.find_element(By.ID, "triage-run").click()
    WebDriverWait(driver, WAIT_S).until(
        lambda d: d.find_element(By.ID, "triage-status").get_attribute("data-verdict"))
    status = driver.find_element(By.ID, "triage-status")
    every = driver.find_elements(By.CSS_SELECTOR, "#triage-results > li")
    items = [li for li in every if li.get_attribute("data-kind") != "case"]
    return {
        "verdict": status.get_attribute("data-verdict"), "status": status.text,
        "matches": [(li.get_attribute("data-match"), li.get_attribute("data-role"),
                     float(li.get_attribute("data-confidence"))) for li in items],
        "items": items,
        # the known cases' votes (cases.py), in order, with the reports each links to
        "cases": [(li.get_attribute("data-match"), [a.get_attribute("href") for a in
                                                    li.find_elements(By.CSS_SELECTOR, ".match-cases a")])
                  for li in every if li.get_attribute("data-kind") == "case"],
    }


def python_triage(library_and_kb: tuple[Any, Any], path: Path) -> TriageResult:
    library, kb = library_and_kb
    return triage_sources(library, kb, [Source(str(path))])


PAGE_VERDICT = {CAUSE: "cause", KNOCK_ON: "knock-on", "similar": "unknown", "no-error": "no-error"}


def python_answer(result: TriageResult) -> tuple[str, list[tuple[str, str, float]]]:
    """What the page would show of a Python triage: its verdict, and its matches in order but the
    known cases' votes (a signature's, a reading's, or what the error line's text resembles)."""
    known = [(f"{m.runbook}:{m.conclusion}", m.role, m.confidence)
             for m in result.matches if m.kind != "case"]
    return PAGE_VERDICT[result.verdict], known


@pytest.mark.parametrize("path", LOGS, ids=[p.name for p in LOGS])
def test_page_ranks_like_runbook_triage(browser, site: Path, library_and_kb, path: Path) -> None:
    result = python_triage(library_and_kb, path)
    shown = page_triage(browser, site, "en", log_text(path))
    verdict, expected = python_answer(result)
    assert shown["verdict"] == verdict, shown["status"]
    if expected:
        assert shown["matches"][0][0] == f"{result.matches[0].runbook}:{result.matches[0].conclusion}"
    assert shown["matches"] == expected


# Corpus logs of every verdict whose answer gets known cases: pasted whole, each finds its own report.
CASE_LOGS = [CORPUS / name for name in (
    "colossalai/4343-torchrun-multinode-node2-timeout.log",
    "sglang/3460-scheduler-init-nccl-system-error.log",
    "torchtitan/3065-dcp-save-hang.log",
    "openrlhf/862-ring-attn-32b-16k-actor-died.log",
    "horovod/1442-stall-inspector-rank6.log",
    "pytorch/38702-connect-refused-unknown-ip.log")]


def python_cases(result: TriageResult) -> list[tuple[str, list[str]]]:
    """The case matches of a Python triage, in order, with the reports each rests on."""
    return [(f"{m.runbook}:{m.conclusion}", [case.source for _, case in m.cases])
            for m in result.matches if m.kind == "case"]


def test_page_compares_with_known_cases_like_runbook_triage(browser, site: Path, library_and_kb) -> None:
    verdicts = Counter()
    for path in CASE_LOGS:
        result = python_triage(library_and_kb, path)
        expected = python_cases(result)
        shown = page_triage(browser, site, "en", log_text(path))
        assert shown["cases"] == expected, path.name
        verdicts[result.verdict] += bool(expected)
    assert verdicts["similar"] and (verdicts["cause"] or verdicts["knock-on"]), verdicts
    zh = page_triage(browser, site, "zh", log_text(CASE_LOGS[0]))
    assert zh["cases"] and "已诊断的公开报告" in browser.find_element(By.ID, "triage-results").text


def test_the_page_ranks_by_the_exported_ranking(exported) -> None:
    assert exported["ranking"] == json.loads(json.dumps(RANKING)) == RANKING
    script = (ROOT / "site" / "static" / "triage.js").read_text("utf-8")
    for datum in ("0.6", "0.45", "0.95", "32", "ROLE_ORDER", "ROLE_CONFIDENCE", "KEEP_LINES", "MATCH_LINES"):
        assert datum not in script, f"triage.js holds a ranking datum of its own: {datum}"


def _swap_roles(ranking: dict[str, Any]) -> None:
    ranking["roles"][:2] = ranking["roles"][1::-1]


def _confidence_base(ranking: dict[str, Any]) -> None:
    # the generic confidence 0.2 made 0.3, the specific base 0.45 made 0.2
    ranking["evidence"]["signature"]["confidence"] = [
        "if", "generic", 0.3, ["min", 0.95, ["+", 0.2, ["*", 0.25, ["log2", ["+", 1, "weight"]]]]]]


def _knock_on_share(ranking: dict[str, Any]) -> None:
    next(role for role in ranking["roles"] if role["id"] == KNOCK_ON)["confidence"] = 0.95


def _score_first(ranking: dict[str, Any]) -> None:
    ranking["order"].insert(0, {"key": "score", "descending": True})


def _no_clock(ranking: dict[str, Any]) -> None:
    ranking["by_time"] = None


# Logs whose answer each change below alters: causes and knock-ons, several causes, times.
CHANGED_LOGS = [p for p in LOGS
                if p.name.split("-")[0] in ("08", "13", "15", "16", "17", "41", "42", "59", "62")]
CHANGES: dict[str, Callable[[dict[str, Any]], None]] = {
    "role order swapped": _swap_roles, "confidence base": _confidence_base,
    "knock-on confidence": _knock_on_share, "score first": _score_first, "no tie by time": _no_clock}


@pytest.fixture(scope="module")
def unchanged(library_and_kb) -> dict[Path, tuple[str, list[tuple[str, str, float]]]]:
    return {path: python_answer(python_triage(library_and_kb, path)) for path in CHANGED_LOGS}


@pytest.mark.parametrize("change", CHANGES)
def test_a_changed_ranking_changes_cli_and_page_alike(browser, site: Path, library_and_kb, unchanged,
                                                      monkeypatch, change: str) -> None:
    """One datum of triage/ranking.py changed: Python and the page (given the changed data, as a
    rebuilt site would be) answer alike, and differently from before on at least one log."""
    ranking = copy.deepcopy(RANKING)
    CHANGES[change](ranking)
    for key, value in ranking.items():
        monkeypatch.setitem(RANKING, key, value)
    open_page(browser, site, "en")
    browser.execute_script("const t = window.runbookTriage;"
                           "t.page.engine = new t.Engine(Object.assign({}, window.RUNBOOK_TRIAGE,"
                           " {ranking: arguments[0]}));", ranking)
    try:
        after = {}
        for path in CHANGED_LOGS:
            after[path] = python_answer(python_triage(library_and_kb, path))
            shown = page_triage(browser, site, "en", log_text(path))
            assert (shown["verdict"], shown["matches"]) == after[path], path.name
    finally:
        browser.execute_script("const t = window.runbookTriage; t.page.engine = t.engine;")
    assert after != unchanged, f"{change}: no log's answer changed"


def test_every_signature_compiles_and_matches_like_python(browser, site: Path, exported,
                                                          library_and_kb) -> None:
    library, _ = library_and_kb
    wanted = sorted((rb.id, s.conclusion, s.pattern) for rb in library.runbooks() for s in rb.signatures
                    if s.conclusion)
    assert sorted((s["runbook"], s["conclusion"], s["pattern"]) for s in exported["signatures"]) == wanted
    raw = [line for path in LOGS for line in log_text(path).splitlines()]
    raw += ["> RuntimeError: NCCL error", ">>> t.to(cuda0)", "[pod/w-0/pytorch] [rank1]: x",  # pastes' own
            "&gt; expected &lt;class &#39;torch.Tensor&#39;&gt; &amp;amp;"]  # decoration (lognorm.py)
    lines = [normalize(line) for line in raw]
    open_page(browser, site, "en")
    found = browser.execute_script("""
        const [signatures, raw, lines] = arguments;
        const engine = window.runbookTriage.engine;
        const out = {errors: [], hits: [], normalised: raw.map(line => engine.normalise(line))};
        for (const s of signatures) {
          let re;
          try { re = new RegExp(s.source, s.flags); }
          catch (e) { out.errors.push(s.pattern + ': ' + e); continue; }
          const hits = [];
          lines.forEach((line, i) => { if (re.test(line)) hits.push(i); });
          out.hits.push(hits);
        }
        return out;
    """, exported["signatures"], raw, lines)
    assert found["errors"] == []
    assert found["normalised"] == lines  # the JavaScript port of lognorm.PREFIX strips the same
    for signature, hits in zip(exported["signatures"], found["hits"], strict=True):
        regex = re.compile(signature["pattern"])
        python = [i for i, line in enumerate(lines) if regex.search(line)]
        assert hits == python, signature["pattern"]


def test_zh_page_shows_chinese_labels(browser, site: Path, exported, library_and_kb) -> None:
    path = next(p for p in LOGS if "cuda-oom" in p.name)
    top = python_triage(library_and_kb, path).matches[0]
    shown = page_triage(browser, site, "zh", log_text(path))
    assert shown["verdict"] == "cause"
    assert "根因在前" in shown["status"]
    first = shown["items"][0]
    assert first.find_element(By.CSS_SELECTOR, ".match-role").text == "根因"
    assert first.find_element(By.CSS_SELECTOR, ".match-title").text == top.title.get("zh")
    assert "置信度" in first.text and "匹配的行" in first.text
    link = urlparse(first.find_element(By.CSS_SELECTOR, ".match-title").get_attribute("href"))
    assert link.path.endswith(f"/zh/runbooks/{top.runbook}/index.html") or \
        link.path.endswith(f"/zh/runbooks/{top.runbook}/")
    assert link.fragment == top.conclusion
    assert browser.find_element(By.CSS_SELECTOR, "[data-nav-triage]").text == "分析日志"


def test_only_knock_ons_say_the_cause_is_elsewhere(browser, site: Path, library_and_kb,
                                                   tmp_path: Path) -> None:
    # the lines of a log that only knock-on signatures match, cut out of the logs themselves
    for path in LOGS:
        knock_ons = [m for m in python_triage(library_and_kb, path).matches if m.role == KNOCK_ON]
        if knock_ons:
            break
    else:
        pytest.fail("no log in tests/data/logs has a knock-on match")
    numbers = {line.line_no for m in knock_ons for line in m.lines()}
    text = "\n".join(line for n, line in enumerate(log_text(path).splitlines(), 1) if n in numbers) + "\n"
    (tmp_path / "knock-on.log").write_text(text, "utf-8")
    result = python_triage(library_and_kb, tmp_path / "knock-on.log")
    assert result.verdict == KNOCK_ON
    for lang, words, label in (
            ("en", "this is a consequence: the cause is earlier, or on another rank", "knock-on"),
            ("zh", "这是后果：根因更早，或在另一个 rank 上", "后果")):
        shown = page_triage(browser, site, lang, text)
        assert shown["verdict"] == "knock-on"
        assert words in shown["status"]
        assert shown["matches"][0][0] == f"{result.matches[0].runbook}:{result.matches[0].conclusion}"
        assert shown["items"][0].find_element(By.CSS_SELECTOR, ".match-role").text == label


def test_no_error_and_unknown_error(browser, site: Path) -> None:
    quiet = "2024-05-01 12:00:00 INFO step 100 loss 2.345\n[rank0]: step 101 loss 2.301\nEpoch 1 done\n"
    shown = page_triage(browser, site, "en", quiet)
    assert shown["verdict"] == "no-error" and shown["matches"] == []
    assert "No error found" in shown["status"]
    assert page_triage(browser, site, "zh", quiet)["status"].startswith("未发现错误")

    odd = "[rank2]: Traceback (most recent call last):\n[rank2]:   File \"x.py\", line 3\n" \
          "[rank2]: FrobnicatorError: the frobnicator refused the widget\n"
    shown = page_triage(browser, site, "en", odd)
    assert shown["verdict"] == "unknown"
    assert "No known signature matches" in shown["status"]
    assert "FrobnicatorError: the frobnicator refused the widget" in shown["status"]
    search = browser.find_element(By.CSS_SELECTOR, "#triage-status a.triage-search").get_attribute("href")
    assert urlparse(search).path.endswith("/en/search/")
    assert parse_qs(urlparse(search).query)["q"] == ["FrobnicatorError: the frobnicator refused the widget"]


def test_a_traceback_cut_before_its_exception_is_an_error_like_runbook_triage(browser, site: Path,
                                                                             library_and_kb) -> None:
    """Frames alone (`File "...", line 1505, in f`) are an error whose exception was cut off, as
    `runbook triage` reads them: not a log that just stops (its knock-on `log-stalled`)."""
    path = CORPUS / "deepspeed" / "113-baichuan2-zero3-init-oom.log"
    result = python_triage(library_and_kb, path)
    shown = page_triage(browser, site, "en", log_text(path))
    assert result.verdict == "similar" and shown["verdict"] == "unknown", shown["status"]
    assert "_configure_zero_optimizer" in shown["status"]


def page_advice(driver: webdriver.Chrome) -> tuple[str | None, list[str]]:
    """The shape the page gave the excerpt and the ids of what it says to collect."""
    boxes = driver.find_elements(By.CSS_SELECTOR, "#triage-status .triage-advice")
    if not boxes:
        return None, []
    items = boxes[0].find_elements(By.CSS_SELECTOR, "li[data-collect]")
    return boxes[0].get_attribute("data-shape"), [li.get_attribute("data-collect") for li in items]


def python_advice(result: TriageResult) -> tuple[str | None, list[str]]:
    if result.advice is None:
        return None, []
    return result.advice.shape, [c["id"] for c in result.advice.collect()]


CORPUS_LOGS = sorted(CORPUS.glob("*/*.log"))


@pytest.fixture(scope="module")
def corpus_results(library_and_kb) -> dict[Path, TriageResult]:
    """`runbook triage` of every corpus log, once for the tests that compare the page with it."""
    return {path: python_triage(library_and_kb, path) for path in CORPUS_LOGS}


def test_page_gives_every_corpus_log_the_answer_of_runbook_triage(
        browser, site: Path, corpus_results) -> None:
    """The page's engine on each real-world log (without the page around it, for speed): the
    same verdict, the same matches of every kind in order with the same confidence, and with no
    error line the same closest conclusions for the same words."""
    open_page(browser, site, "en")
    texts = [log_text(path) for path in corpus_results]
    answers = browser.execute_script(
        "return arguments[0].map(function (text) { var r = window.runbookTriage.engine.triage(text);"
        " return [r.verdict, r.matches.map(function (m) {"
        " return [m.key, m.role, m.confidence.toFixed(2), m.kind || 'conclusion']; }),"
        " r.closest.map(function (c) { return [c.key, c.shared]; })]; });", texts)
    differ, kinds = [], Counter()
    for (path, result), (verdict, matches, closest) in zip(corpus_results.items(), answers, strict=True):
        closest_cli = result.advice.closest if result.advice else []
        cli = (PAGE_VERDICT[result.verdict],
               [[f"{m.runbook}:{m.conclusion}", m.role, round(m.confidence, 2), m.kind]
                for m in result.matches],
               [[f"{c.runbook}:{c.conclusion}", c.shared] for c in closest_cli])
        page = (verdict, [[k, role, float(c), kind] for k, role, c, kind in matches], closest)
        if page != cli:
            differ.append(f"{path.parent.name}/{path.name}: page {page[0]} {page[1][:3]} {page[2][:1]}, "
                          f"CLI {cli[0]} {cli[1][:3]} {cli[2][:1]}")
        kinds.update(kind for *_, kind in page[1])
        kinds["closest"] += bool(closest)
    assert not differ, "\n".join(differ)
    # what an unknown error line resembles (BM25, an article too) and what a paste without one does
    assert kinds["case"] and kinds["article"] and kinds["closest"] >= 20, kinds


def test_page_advises_like_runbook_triage(browser, site: Path, corpus_results) -> None:
    """Wherever the CLI gives no cause, the page says the same about what the excerpt lacks and
    what to collect."""
    compared = Counter()
    for path, result in corpus_results.items():
        if result.verdict not in ("no-error", "similar"):
            continue
        shown = page_triage(browser, site, "en", log_text(path))
        assert shown["verdict"] == PAGE_VERDICT[result.verdict], path.name
        assert page_advice(browser) == python_advice(result), path.name
        compared[result.advice.shape] += 1
    assert sum(compared.values()) >= 30 and len(compared) >= 3, compared


def test_advice_in_both_languages(browser, site: Path) -> None:
    cut = "[rank0]: Traceback (most recent call last):\n[rank0]:   File \"train.py\", line 41, in <module>\n"
    shown = page_triage(browser, site, "zh", cut)
    assert page_advice(browser) == ("cut-in-traceback", ["traceback-end", "tail", "collect-env"])
    assert "内容缺少什么：" in shown["status"] and "traceback" in shown["status"]
    assert "grep -n -A 60 'Traceback (most recent call last)' LOG | tail -n 80" in shown["status"]
    shown = page_triage(browser, site, "en", "step 1 loss 2.0\nstep 2 loss 1.9\nstep 3 loss 1.8\n")
    assert page_advice(browser) == ("metrics-only", ["step-times", "py-spy", "tail"])
    assert "Collect next:" in shown["status"] and "runbook run slow-training --nodes HOSTS" in shown["status"]
    # A dump matches training-hang's stack-dump signature (a knock-on), so no advice is shown
    # for it; the page's own shape rules still read it as the CLI's do.
    dump = ['Thread 0x7F3A2B1C0740 (idle): "MainThread"', "    wait (threading.py:320)"]
    shape = browser.execute_script(
        "var e = window.runbookTriage.engine;"
        "return e.shapeOf(arguments[0].map(function (t, i) { return {no: i + 1, raw: t, text: t}; }),"
        " 'no-error').id;", dump)
    assert shape == shape_of(dump, "no-error") == "stack-dump"


def test_page_names_what_differs_across_hosts_like_runbook_triage(browser, site: Path, library_and_kb,
                                                                     tmp_path: Path) -> None:
    """The same facts, values and hosts as the CLI's `differences` (spread.py), and the box that
    says them with a link to the conclusion they point to."""
    mixed = tmp_path / "ranks.log"
    mixed.write_text("[1,0]<stdout>:NCCL version 2.4.2+cuda10.0\n[1,4]<stdout>:NCCL version 2.5.6+cuda10.1\n"
                     "gpu6:1:2 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1\n"
                     "gpu7:3:4 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 0\n"
                     "[rank0]: RuntimeError: CUDA error: an illegal memory access was encountered\n")
    real = ROOT / "tests" / "data" / "triage-corpus" / "nccl" / "1634-net-plugin-on-part-of-hosts.log"
    for path in (real, mixed):
        expected = [{**d, "values": [{k: v for k, v in value.items() if k != "first"}  # a file:line
                                     for value in d["values"]]}
                    for d in python_triage(library_and_kb, path).differences]
        assert expected
        shown = page_triage(browser, site, "en", log_text(path))
        got = browser.execute_script(
            "return window.runbookTriage.engine.triage(arguments[0]).differences.map(function (d) {"
            " return {fact: d.fact, conclusion: d.conclusion, values: d.values.map(function (v) {"
            " return {value: v.value, who: v.who, more: v.more, line: v.line}; })}; });", log_text(path))
        assert got == expected, path.name
        python = python_triage(library_and_kb, path)
        assert (shown["verdict"], shown["matches"]) == python_answer(python), path.name
        if path == real:  # no line names a failure: the difference is the conclusion, said alike
            assert shown["matches"][0][0] == "nccl-errors:nccl-settings-differ"
            said = shown["items"][0].find_element(By.CSS_SELECTOR, ".match-reading").text
            assert said == describe_reading(python.matches[0].reading, "en")
        box = browser.find_element(By.CSS_SELECTOR, "#triage-status .triage-differences")
        assert "Differs across hosts/ranks:" in box.text
        for diff in expected:
            assert any(f"{v['value']} on {', '.join(v['who'])}" in box.text for v in diff["values"]), box.text
        links = [a.get_attribute("href") for a in box.find_elements(By.TAG_NAME, "a")]
        assert links and all("nccl-errors" in href for href in links), links
    assert shown["matches"]  # the mixed paste's CUDA error is still ranked as before


SERIES_CORPUS = ["torchtitan/950-healthy-steps-dataset-relooped.log",
                 "transformers/33336-healthy-loss-first-run.log",
                 "clip4clip/58-two-host-step-time-alternates-44s-4s.log"]  # every other step slow


def _comparable(reading: dict[str, Any]) -> dict[str, Any]:
    """A reading without where it was found (file:line in the CLI, line N on the page)."""
    return {"reading": reading["reading"], "conclusion": reading["conclusion"],
            "facts": {k: v for k, v in reading["facts"].items() if k != "at"}}


def test_page_reads_the_numbers_like_runbook_triage(browser, site: Path, library_and_kb,
                                                    tmp_path: Path) -> None:
    """The same readings of loss, learning rate, step time and throughput as the CLI's (series.py),
    and the box that says them with a link to the conclusion they point to."""
    paths = [ROOT / "tests" / "data" / "triage-corpus" / name for name in SERIES_CORPUS]
    for name, text in {**EXAMPLES, **STACK_EXAMPLES, **LOGENDS_EXAMPLES, **TOPOLOGY_EXAMPLES}.items():
        paths.append(tmp_path / f"{name}.log")
        paths[-1].write_text(text)
    kinds = set()
    for path in paths:
        result = python_triage(library_and_kb, path)
        expected = [_comparable(r) for r in result.readings]
        shown = page_triage(browser, site, "en", log_text(path))
        got = browser.execute_script("return window.runbookTriage.engine.triage(arguments[0]).readings;",
                                     log_text(path))
        assert [_comparable(r) for r in got] == expected, path.name
        kinds.update(r["reading"] for r in expected)
        if not expected:
            continue
        box = browser.find_element(By.CSS_SELECTOR, "#triage-status .triage-readings")
        ends = all(r["reading"].startswith("log-stops") for r in expected)
        assert ("What the log's end shows:" if ends else "What the numbers show:") in box.text
        items = box.find_elements(By.CSS_SELECTOR, "li[data-reading]")
        assert [i.get_attribute("data-reading") for i in items] == [r["reading"] for r in result.readings]
        for reading, item in zip(result.readings, items, strict=True):
            facts = reading["facts"]  # the page says where as `line N`, the CLI as file:N
            if "at" in facts:
                facts = {**facts, "at": "line " + facts["at"].rsplit(":", 1)[1]}
            said = describe_reading({**reading, "facts": facts})  # as HTML shows it: spaces collapsed
            assert " ".join(said.split()) in " ".join(item.text.split()), item.text
        runbooks = {r["conclusion"].split(":")[0] for r in expected if r["conclusion"]}
        links = [a.get_attribute("href") for a in box.find_elements(By.TAG_NAME, "a")]
        assert not runbooks or any(rb in href for href in links for rb in runbooks), links
        assert shown["verdict"] == PAGE_VERDICT[result.verdict]
        # what the readings name ranks as the CLI ranks it (result.rank_all, verdict.from_readings)
        verdict, expected_matches = python_answer(result)
        assert (shown["verdict"], shown["matches"]) == (verdict, expected_matches), path.name
    assert kinds >= {"step-spikes", "loss-nonfinite", "loss-nonfinite-from-start", "loss-climbs",
                     "lr-constant", "lr-zero", "slow-rank", "loss-steady", "stack-mismatch", "stack-wait",
                     "loss-scale-collapses", "host-memory-grows", "stack-unnamed", "loss-jumps",
                     "lr-zero-then-constant", "kv-cache-stuck",
                     "log-stops", "log-stops-rl", "topo-pcie", "p2p-slower", "copy-zeros"}


# OOM messages whose numbers decide the conclusion (ranking `refine`, checks/facts/cuda_oom).
OOM_NUMBERS = {
    # verbatim, https://github.com/QwenLM/Qwen/issues/715: 22 GiB in use outside PyTorch
    "outside-pytorch": (
        " CUDA out of memory. Tried to allocate 96.00 MiB (GPU 3; 31.74 GiB total capacity; "
        "9.44 GiB already allocated; 11.38 MiB free; 9.46 GiB reserved in total by PyTorch) "
        "If reserved memory is >> allocated memory try setting max_split_size_mb to avoid "
        "fragmentation.", "cuda-oom:gpu-held-by-other-process"),
    # verbatim, https://github.com/Strawberry-Eat-Mango/PCT_Pytorch/issues/27: the CUDA context alone
    "context-only": (
        "RuntimeError: CUDA out of memory. Tried to allocate 16.00 MiB (GPU 0; 3.94 GiB total "
        "capacity; 2.98 GiB already allocated; 14.25 MiB free; 3.00 GiB reserved in total by "
        "PyTorch)", "cuda-oom:oom-batch-or-model"),
    # constructed from the 2.1 format: this process 4 GiB of 16, nobody listed (a container)
    "unlisted-in-container": (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a "
        "total capacity of 16.00 GiB of which 0 bytes is free. Including non-PyTorch memory, "
        "this process has 4.00 GiB memory in use. Of the allocated memory 3.00 GiB is allocated "
        "by PyTorch, and 0 bytes is reserved by PyTorch but unallocated.",
        "cuda-oom:gpu-held-by-other-process"),
    # constructed: PyTorch lists itself (no "this process has") and holds nearly the whole card
    "self-listed": (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
        "total capacity of 16.00 GiB of which 100.00 MiB is free. Process 4242 has 15.80 GiB "
        "memory in use. Of the allocated memory 15.00 GiB is allocated by PyTorch, and 300.00 "
        "MiB is reserved by PyTorch but unallocated.", "cuda-oom:oom-batch-or-model"),
}


# load_state_dict's key lists: a wrapper's prefix between them (checks/facts/state_dict)
KEY_LISTS = {
    # verbatim, https://github.com/aks2203/deep-thinking/issues/5: saved under DataParallel
    "module-prefix": (
        "RuntimeError: Error(s) in loading state_dict for DTNet:\n"
        '\tMissing key(s) in state_dict: "projection.0.weight", "head.0.weight", "head.2.weight". \n'
        '\tUnexpected key(s) in state_dict: "module.projection.0.weight", "module.head.0.weight", '
        '"module.head.2.weight".', "checkpoint-problems:prefix-mismatch"),
    # verbatim, https://github.com/hou-yz/MVDet/issues/7: a module renamed, no prefix
    "renamed": (
        'Missing key(s) in state_dict: "map_classifier.0.weight", "map_classifier.0.bias". \n'
        'Unexpected key(s) in state_dict: "world_classifier.0.weight", "world_classifier.0.bias".',
        "checkpoint-problems:config-mismatch"),
}


def test_page_refines_by_the_messages_facts_like_runbook_triage(browser, site: Path, library_and_kb,
                                                               tmp_path: Path) -> None:
    for name, (text, wanted) in {**OOM_NUMBERS, **KEY_LISTS}.items():
        path = tmp_path / f"{name}.log"
        path.write_text(text + "\n")
        result = python_triage(library_and_kb, path)
        assert f"{result.matches[0].runbook}:{result.matches[0].conclusion}" == wanted, name
        shown = page_triage(browser, site, "en", text)
        assert (shown["verdict"], shown["matches"]) == python_answer(result), name


def test_page_makes_no_network_request(browser, site: Path) -> None:
    browser.get_log("performance")  # drain
    browser.get("about:blank")
    path = next(p for p in LOGS if "watchdog" in p.name)
    shown = page_triage(browser, site, "en", log_text(path))
    assert shown["matches"]
    requested = []
    for entry in browser.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            requested.append(message["params"]["request"]["url"])
    assert requested and all(urlparse(u).scheme in ("file", "data", "about") for u in requested), requested
    assert [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
    script = (site / "static" / "triage.js").read_text("utf-8")
    for call in ("fetch(", "XMLHttpRequest", "import(", "WebSocket", "sendBeacon"):
        assert call not in script


def test_page_shows_what_an_unknown_error_line_resembles(browser, site: Path, library_and_kb) -> None:
    """BM25's matches on the page: a knowledge-base article links to its page, a conclusion to its
    runbook, each with the error line it was compared by; a conclusion the reports vote for too
    lists them as well."""
    path = CORPUS / "fairseq" / "168-thcudacheck-oom-skipping-batch.log"
    result = python_triage(library_and_kb, path)
    assert result.verdict == "similar" and any(m.kind == "article" for m in result.matches)
    page_triage(browser, site, "en", log_text(path))
    items = browser.find_elements(By.CSS_SELECTOR, "#triage-results > li")
    assert [li.get_attribute("data-kind") for li in items] == [m.kind for m in result.matches]
    for li, match in zip(items, result.matches, strict=True):
        link = li.find_element(By.CSS_SELECTOR, ".match-open").get_attribute("href")
        if match.kind == "article":
            assert f"/kb/{match.conclusion}/" in link and "article" in li.text.lower()
        if match.kind != "case":
            assert result.error_line.text[:40] in li.find_element(By.CSS_SELECTOR, ".match-lines").text
        assert bool(li.find_elements(By.CSS_SELECTOR, ".match-cases a")) == bool(match.cases)


def test_page_names_the_closest_conclusions_of_a_paste_without_errors(browser, site: Path,
                                                                      library_and_kb) -> None:
    path = CORPUS / "chatglm-tuning" / "89-loss-drops-too-fast.log"
    result = python_triage(library_and_kb, path)
    assert result.verdict == "no-error" and result.advice and result.advice.closest
    for lang, title in (("en", "Closest conclusions"), ("zh", "最接近的结论")):
        page_triage(browser, site, lang, log_text(path))
        box = browser.find_element(By.CSS_SELECTOR, "#triage-status .triage-advice .triage-closest")
        items = box.find_elements(By.CSS_SELECTOR, "li[data-match]")
        assert [li.get_attribute("data-match") for li in items] == [
            f"{c.runbook}:{c.conclusion}" for c in result.advice.closest]
        assert title in box.text and result.advice.closest[0].shared[0] in items[0].text
        assert result.advice.closest[0].title.get(lang) in items[0].text


def test_page_names_a_release_bug_like_runbook_triage(browser, site: Path, library_and_kb,
                                                      tmp_path: Path) -> None:
    text = ("gpu01:4242:4242 [0] NCCL INFO NCCL version 2.18.1+cuda12.1\n"
            "[rank1]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1333, "
            "unhandled cuda error (run with NCCL_DEBUG=INFO for details)\n[rank1]: Last error:\n"
            "[rank1]: Cuda failure 'invalid argument'\n")
    path = tmp_path / "release.log"
    path.write_text(text)
    result = python_triage(library_and_kb, path)
    first = result.matches[0]
    assert first.release is not None
    for lang in ("en", "zh"):
        shown = page_triage(browser, site, lang, text)
        assert (shown["verdict"], shown["matches"]) == python_answer(result)
        said = shown["items"][0].find_element(By.CSS_SELECTOR, ".match-release").text
        assert said == releases.describe(first.release, lang)
