"""Recordings: what `--record` keeps (in order, per node, without fixes, secrets hidden), how the
directory is guarded, how a recording is read back, and how a replay judges today's runbooks."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from runbook.library.runbooks import load_library
from runbook.run.recording import (
    FILE,
    SCHEMA,
    RecordingError,
    RecordingTransport,
    build_recording,
    load_recording,
    prepare_dir,
    write_recording,
)
from runbook.run.redact import REDACTED
from runbook.run.replay import CHANGED, INCOMPLETE, SAME, accept, replay
from runbook.run.walk import NodeOutcome, Walk
from runbook.testing.runner import ReplayTransport
from runbook.transports import Node, ProbeAnswer

TREE = """apiVersion: runbook/v1
id: rec
version: 1.0.0
title: {en: Recorded, zh: 录制}
summary: {en: A tree to record, zh: 用于录制的诊断树}
params:
  log: {type: path, help: {en: The log, zh: 日志}}
start: find
steps:
  find:
    title: {en: Find, zh: 查找}
    check: {type: process, with: {match: train}}
    branches:
      - when: not result.found
        goto: gone
    default: poll
  poll:
    title: {en: Poll, zh: 轮询}
    check: {type: log, with: {path: "{{ params.log }}"}}
    branches:
      - when: result.again
        goto: poll
      - when: result.age_s > 60
        goto: stuck
    default: moving
conclusions:
  gone: {severity: info, taxonomy: [], title: {en: Gone, zh: 已退出}, explanation: {en: G, zh: 退出}}
  stuck: {severity: warning, taxonomy: [hang.dataloader], title: {en: Stuck, zh: 卡住},
          explanation: {en: S, zh: 卡}}
  moving: {severity: ok, taxonomy: [], title: {en: Moving, zh: 在动}, explanation: {en: M, zh: 动}}
"""
SECRET = "hunter2-abcdef"


def library(tmp_path: Path, text: str = TREE) -> Any:
    folder = tmp_path / "lib"
    folder.mkdir(exist_ok=True)
    (folder / "rec.yaml").write_text(text)
    lib = load_library([folder])
    assert not lib.problems, [str(p) for p in lib.problems]
    return lib


class Canned(ReplayTransport):
    """Answers from canned results and serves a list per step in order (a step asked twice)."""

    def __init__(self, results: dict[str, dict[str, Any]]) -> None:
        super().__init__(results)
        self.requests: list[dict[str, Any]] = []

    def run_check(self, node: Node, request: dict[str, Any], timeout: float) -> ProbeAnswer:
        self.requests.append(request)
        if "step" not in request:  # a fix's command
            return ProbeAnswer("ok", {"ok": True, "exit_code": 0})
        canned = self.results.get(node.name, {}).get(request["step"])
        if isinstance(canned, list):
            answer = canned.pop(0)
            return ProbeAnswer("ok", {"timed_out": False, **answer}, duration_s=0.01)
        return super().run_check(node, request, timeout)


def record(tmp_path: Path, results: dict[str, dict[str, Any]], params: dict[str, Any] | None = None,
           lib: Any = None) -> Path:
    lib = lib or library(tmp_path)
    recorder = RecordingTransport(Canned(copy.deepcopy(results)))
    params = params if params is not None else {"log": "/var/log/train.log"}
    outcomes = Walk(lib, lib.get("rec"), [Node(n) for n in results], recorder, params).run()
    doc = build_recording(lib.get("rec"), outcomes, recorder.answers, params, "2026-01-02T03:04:05Z")
    folder = tmp_path / "incident"
    prepare_dir(folder)
    write_recording(folder, doc)
    return folder


LOOPING = {"n1": {"find": {"found": True}, "poll": [{"again": True, "age_s": 1}, {"age_s": 900}]},
           "n2": {"find": {"found": False}}}


def test_every_step_answer_is_kept_per_node_in_order(tmp_path: Path) -> None:
    doc = json.loads((record(tmp_path, LOOPING) / FILE).read_text())
    assert doc["schema"] == SCHEMA and doc["runbook"]["id"] == "rec"
    assert doc["runbook"]["version"] == "1.0.0" and doc["runbook"]["digest"].startswith("sha256:")
    assert doc["recorded_at"] == "2026-01-02T03:04:05Z" and doc["engine"]["version"]
    n1, n2 = doc["nodes"]
    assert (n1["node"], n1["status"], n1["conclusion"]) == ("n1", "concluded",
                                                             {"id": "stuck", "runbook": "rec"})
    assert n1["path"] == ["find", "poll", "poll"]
    polls = n1["results"]["poll"]
    assert [p["result"]["age_s"] for p in polls] == [1, 900]  # visited twice: both, in order
    assert polls[0]["with"] == {"path": "/var/log/train.log"} and polls[0]["check"] == "log"
    assert n2["conclusion"]["id"] == "gone" and list(n2["results"]) == ["find"]


def test_fix_commands_and_verify_checks_are_not_recorded() -> None:
    inner = Canned({"n": {"look": {"ok": True}}})
    recorder = RecordingTransport(inner)
    node = Node("n")
    recorder.run_check(node, {"check": "command", "with": {"run": "true"}, "step": "look"}, 1)
    recorder.run_check(node, {"check": "command", "with": {"run": "touch x"}}, 1)  # a fix
    recorder.run_check(node, {"check": "command", "with": {"run": "test -e x"},
                              "step": "fix:verify"}, 1)
    assert len(inner.requests) == 3  # all of them really ran
    assert [a.request["step"] for a in recorder.answers["n"]] == ["look"]
    recorder.clear()
    assert recorder.answers == {}


def test_secrets_in_params_and_results_never_reach_the_file(tmp_path: Path) -> None:
    process = {"found": True, "pid": 7, "processes": [
        {"pid": 7, "cmdline": f"python train.py --token={SECRET} --lr 3e-4"}],
        "environ": {"WANDB_API_KEY": SECRET, "RANK": "0"}}
    results = {"n": {"find": process, "poll": [{"age_s": 3, "last_line": f"api_key: {SECRET}"}]}}
    folder = record(tmp_path, results, {"log": f"/logs/x.log?token={SECRET}"})
    text = (folder / FILE).read_text()
    assert SECRET not in text
    doc = json.loads(text)
    kept = doc["nodes"][0]["results"]["find"][0]["result"]
    assert kept["processes"][0]["cmdline"] == f"python train.py --token={REDACTED} --lr 3e-4"
    assert kept["environ"] == {"WANDB_API_KEY": REDACTED, "RANK": "0"}
    assert kept["pid"] == 7 and doc["nodes"][0]["conclusion"]["id"] == "moving"


def test_a_field_the_check_declares_is_kept_though_its_name_looks_secret(tmp_path: Path) -> None:
    recorder = RecordingTransport(Canned({"n": {"inspect": {"state_dict_key": "model",
                                                            "api_key": "x"}}}))
    recorder.run_check(Node("n"), {"check": "checkpoint", "with": {}, "step": "inspect"}, 1)
    doc = build_recording(library(tmp_path).get("rec"), [NodeOutcome(Node("n"))], recorder.answers,
                          {}, "2026-01-02T03:04:05Z")
    kept = doc["nodes"][0]["results"]["inspect"][0]["result"]
    assert (kept["state_dict_key"], kept["api_key"]) == ("model", REDACTED)


def test_the_directory_is_created_and_only_a_recording_is_overwritten(tmp_path: Path) -> None:
    fresh = tmp_path / "a" / "b"
    prepare_dir(fresh)
    assert fresh.is_dir()
    prepare_dir(fresh)  # empty: fine
    (fresh / "notes.txt").write_text("mine")
    with pytest.raises(RecordingError, match=r"b: --record: the directory is not empty and holds no "
                                             r"recording \(name a new or empty directory\)"):
        prepare_dir(fresh)
    folder = record(tmp_path, LOOPING)
    prepare_dir(folder)  # holds a recording: may be overwritten
    with pytest.raises(RecordingError, match="not a directory"):
        prepare_dir(folder / FILE)


@pytest.mark.parametrize(("content", "message"), [
    (None, "no recording here (make one with `runbook run ID --record DIR`)"),
    ("{not json", "cannot read the recording"),
    ('{"schema": "runbook-report/v1"}', "schema: expected 'runbook-recording/v1'"),
    (json.dumps({"schema": SCHEMA, "runbook": {"id": "rec"}, "nodes": [
        {"node": "n", "results": {"find": [{"status": "maybe"}]}}]}),
     "nodes[0].results.find[0].status: 'maybe' is not one of ok, unreachable, error, timeout"),
])
def test_a_bad_recording_is_one_line_that_says_where(tmp_path: Path, content: str | None,
                                                     message: str) -> None:
    if content is not None:
        (tmp_path / FILE).write_text(content)
    with pytest.raises(RecordingError) as info:
        load_recording(tmp_path)
    assert str(info.value).startswith(f"{tmp_path / FILE}: ") and message in str(info.value)
    assert "\n" not in str(info.value)


def test_a_replay_with_the_same_runbook_ends_the_same(tmp_path: Path) -> None:
    lib = library(tmp_path)
    result = replay(lib, load_recording(record(tmp_path, LOOPING, lib=lib)))
    assert [(v.node, v.kind, v.was, v.now) for v in result.verdicts] == [
        ("n1", SAME, "stuck", "stuck"), ("n2", SAME, "gone", "gone")]
    assert result.ok and result.verdicts[0].path == ["find", "poll", "poll"]
    assert result.verdicts[0].changed_with == []


def test_a_changed_runbook_is_changed_and_accept_makes_it_the_expectation(tmp_path: Path) -> None:
    folder = record(tmp_path, LOOPING)
    lib = library(tmp_path, TREE.replace("result.age_s > 60", "result.age_s > 6000")
                  .replace("version: 1.0.0", "version: 1.1.0"))
    result = replay(lib, load_recording(folder))
    assert [(v.kind, v.was, v.now) for v in result.verdicts] == [(CHANGED, "stuck", "moving"),
                                                                (SAME, "gone", "gone")]
    assert accept(result) == []
    doc = json.loads((folder / FILE).read_text())
    assert doc["nodes"][0]["conclusion"] == {"id": "moving", "runbook": "rec"}
    assert doc["runbook"]["version"] == "1.0.0" and doc["accepted"]["version"] == "1.1.0"
    assert doc["nodes"][0]["results"]["poll"][1]["result"]["age_s"] == 900  # answers untouched
    assert replay(lib, load_recording(folder)).ok


def test_a_step_the_recording_lacks_makes_the_node_incomplete(tmp_path: Path) -> None:
    folder = record(tmp_path, LOOPING)
    # Today `find` continues to a step nobody recorded.
    lib = library(tmp_path, TREE.replace(
        "    default: poll\n", "    default: extra\n  extra:\n    title: {en: Extra, zh: 额外}\n"
        "    check: {type: port, with: {port: 1}}\n    default: poll\n"))
    result = replay(lib, load_recording(folder))
    assert [(v.node, v.kind, v.missing) for v in result.verdicts] == [
        ("n1", INCOMPLETE, "extra"), ("n2", SAME, None)]
    assert accept(result) == ["n1"]  # nothing to accept from answers that do not exist
    assert json.loads((folder / FILE).read_text())["nodes"][0]["conclusion"]["id"] == "stuck"


def test_a_step_asked_more_often_than_recorded_is_incomplete(tmp_path: Path) -> None:
    folder = record(tmp_path, LOOPING)
    lib = library(tmp_path, TREE.replace("when: result.again", "when: result.again or result.age_s > 100"))
    verdict = replay(lib, load_recording(folder)).verdicts[0]
    assert (verdict.kind, verdict.missing, verdict.path) == (INCOMPLETE, "poll", ["find", "poll", "poll"])


def test_a_step_asked_with_other_parameters_is_noted(tmp_path: Path) -> None:
    folder = record(tmp_path, LOOPING)
    lib = library(tmp_path, TREE.replace('path: "{{ params.log }}"', 'path: "{{ params.log }}.1"'))
    verdict = replay(lib, load_recording(folder)).verdicts[0]
    assert (verdict.kind, verdict.changed_with) == (SAME, ["poll", "poll"])


def _recording_schema() -> dict[str, Any]:
    return json.loads((Path(__file__).resolve().parents[2] / "engine" / "runbook" / "schema"
                       / "recording.v1.json").read_text("utf-8"))


def test_what_is_written_and_accepted_follows_the_shipped_schema(tmp_path: Path) -> None:
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(_recording_schema())
    folder = record(tmp_path, LOOPING)
    assert list(validator.iter_errors(json.loads((folder / FILE).read_text()))) == []
    lib = library(tmp_path, TREE.replace("result.age_s > 60", "result.age_s > 6000"))
    assert accept(replay(lib, load_recording(folder))) == []
    assert list(validator.iter_errors(json.loads((folder / FILE).read_text()))) == []
    broken = json.loads((folder / FILE).read_text())
    broken["nodes"][0]["results"]["poll"][0]["status"] = "fine"
    assert [e.validator for e in validator.iter_errors(broken)] == ["enum"]


def test_the_shipped_recordings_follow_the_schema() -> None:
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(_recording_schema())
    shipped = sorted((Path(__file__).resolve().parents[2] / "runbooks" / "recordings").glob("*/" + FILE))
    assert len(shipped) >= 4
    for path in shipped:
        errors = [e.message for e in validator.iter_errors(json.loads(path.read_text("utf-8")))]
        assert errors == [], (path.parent.name, errors[:3])


def test_hostile_recordings_are_refused_in_one_line(tmp_path: Path) -> None:
    from runbook.format.safeyaml import RECORDING_MAX_BYTES

    deep = tmp_path / "deep" / "incident.json"
    deep.parent.mkdir()
    deep.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(RecordingError, match=r"deep/incident.json: nested too deeply to be a recording$"):
        load_recording(deep)
    binary = tmp_path / "bin" / "incident.json"
    binary.parent.mkdir()
    binary.write_bytes(b'{"schema": "runbook-recording/v1"\x00}')
    with pytest.raises(RecordingError, match=r"json:1: binary content \(a NUL byte at byte offset 33"):
        load_recording(binary)
    huge = tmp_path / "huge" / "incident.json"
    huge.parent.mkdir()
    with huge.open("wb") as fh:
        fh.truncate(RECORDING_MAX_BYTES + 1)  # sparse: no disk used
    with pytest.raises(RecordingError, match=r"file too large: 67,108,865 bytes, the limit is 67,108,864"):
        load_recording(huge)
