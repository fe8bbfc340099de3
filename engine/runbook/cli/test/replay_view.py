"""`runbook test --replay DIR...`: say, per recorded node, whether today's runbooks still end at
the recorded conclusion; `--accept` makes the recordings expect the new ones."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from runbook.library.runbooks import Library
from runbook.run.recording import RecordingError, load_recording
from runbook.run.replay import CHANGED, INCOMPLETE, SAME, Replay, accept, replay

UI = {
    "en": {
        "header": "{file}: {rid} {now} (recorded {at} with {was})",
        SAME: "{node}: same conclusion {was}",
        CHANGED: "{node}: CHANGED: was {was}, now {now} (path {path})",
        INCOMPLETE: "{node}: INCOMPLETE: the runbook now asks step {step}, which the recording lacks",
        "params": "{node}: note: step {steps} asked with other parameters than recorded; "
                  "its recorded result may not reflect them",
        "accepted": "{file}: accepted: it now expects what the runbook concludes today",
        "refused": "{file}: cannot accept: nodes {nodes} need steps the recording lacks "
                   "(record the incident again)",
        "missing_runbook": "{file}: runbook {rid!r} is not on the search path (name its directory "
                           "or add it to RUNBOOK_PATH)",
        "summary": "{n} recording(s), {nodes} node(s): {same} same, {changed} changed, "
                   "{incomplete} incomplete",
    },
    "zh": {
        "header": "{file}：{rid} {now}（录制于 {at}，当时版本 {was}）",
        SAME: "{node}：结论未变 {was}",
        CHANGED: "{node}：CHANGED 结论已改变：原为 {was}，现为 {now}（诊断路径 {path}）",
        INCOMPLETE: "{node}：INCOMPLETE 录制不完整：runbook 现在要执行步骤 {step}，录制中没有它的结果",
        "params": "{node}：注意：步骤 {steps} 的检查参数与录制时不同，录制的结果可能没有反映这些参数",
        "accepted": "{file}：已接受：此录制现在以 runbook 今天得出的结论为预期",
        "refused": "{file}：无法接受：节点 {nodes} 需要录制中没有的步骤（请重新录制这次事故）",
        "missing_runbook": "{file}：搜索路径上没有 runbook {rid!r}（请指定它所在的目录，"
                           "或把目录加入 RUNBOOK_PATH）",
        "summary": "{n} 个录制，{nodes} 个节点：{same} 个结论未变，{changed} 个已改变，"
                   "{incomplete} 个不完整",
    },
}


def run_replays(library: Library, dirs: list[Path], accept_new: bool, fmt: str, lang: str) -> int:
    """Exit 0 when every node ends as recorded (or was accepted), 1 otherwise, 2 when a
    recording cannot be read or its runbook is not loaded."""
    ui = UI[lang]
    replays: list[Replay] = []
    for directory in dirs:
        try:
            recording = load_recording(directory)
        except RecordingError as exc:
            print(f"runbook: {exc}", file=sys.stderr)
            return 2
        if library.get(recording.runbook_id) is None:
            print("runbook: " + ui["missing_runbook"].format(file=recording.path,
                                                              rid=recording.runbook_id),
                  file=sys.stderr)
            return 2
        replays.append(replay(library, recording))
    failed = False
    if fmt == "json":
        print(json.dumps({"recordings": [_json(r) for r in replays]}, ensure_ascii=False, indent=2))
    for result in replays:
        if fmt != "json":
            _print(result, ui)
        failed |= _accept(result, ui) if accept_new and not result.ok else not result.ok
    if fmt != "json":
        _print_summary(replays, ui)
    return 1 if failed else 0


def _accept(result: Replay, ui: dict[str, str]) -> bool:
    """Accept the replay's conclusions; True when some node could not be accepted."""
    refused = accept(result)
    file = result.recording.path
    if refused:
        print(ui["refused"].format(file=file, nodes=", ".join(refused)), file=sys.stderr)
        return True
    print(ui["accepted"].format(file=file), file=sys.stderr)
    return False


def _print(result: Replay, ui: dict[str, str]) -> None:
    doc = result.recording.doc
    print(ui["header"].format(file=result.recording.path.parent, rid=result.runbook.id,
                              now=result.runbook.version, at=doc.get("recorded_at", "?"),
                              was=doc["runbook"].get("version", "?")))
    for v in result.verdicts:
        print("  " + ui[v.kind].format(node=v.node, was=v.was, now=v.now, step=v.missing,
                                       path=" → ".join(v.path)))
        if v.changed_with:
            print("  " + ui["params"].format(node=v.node, steps=", ".join(v.changed_with)))


def _print_summary(replays: list[Replay], ui: dict[str, str]) -> None:
    kinds = [v.kind for r in replays for v in r.verdicts]
    print(ui["summary"].format(n=len(replays), nodes=len(kinds), same=kinds.count(SAME),
                               changed=kinds.count(CHANGED), incomplete=kinds.count(INCOMPLETE)))


def _json(result: Replay) -> dict[str, Any]:
    return {"recording": str(result.recording.path), "runbook": result.runbook.id,
            "version": result.runbook.version,
            "recorded_version": result.recording.doc["runbook"].get("version"),
            "ok": result.ok,
            "nodes": [{"node": v.node, "verdict": v.kind, "was": v.was, "now": v.now,
                       "path": v.path, "missing_step": v.missing, "changed_with": v.changed_with}
                      for v in result.verdicts]}
