"""The runbook model: plain dataclasses built by `loader.py` and read by everything else."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

LANGS = ("en", "zh")
SEVERITIES = ("ok", "info", "warning", "critical")
EFFECTS = ("read-only", "changes-state", "disruptive")


@dataclass(frozen=True)
class Text:
    """A piece of text a person reads, in every supported language."""

    en: str
    zh: str

    def get(self, lang: str) -> str:
        return self.zh if lang == "zh" else self.en


@dataclass
class Param:
    name: str
    type: str  # string | path | integer | number | boolean
    required: bool
    default: Any
    help: Text


@dataclass
class Check:
    type: str
    with_: dict[str, Any]
    timeout: float | None  # seconds; None means the check type's default


@dataclass
class Branch:
    when: str  # Jinja2 expression source, compiled by expr.py
    goto: str  # a step or conclusion id, or `runbook-id:step-id`
    note: Text | None = None  # what taking this branch means, for people


@dataclass
class Step:
    id: str
    title: Text
    check: Check
    branches: list[Branch]
    default: str | None
    description: Text | None = None
    analysis: Analysis | None = None


@dataclass
class Analysis:
    """A job-level analysis of a step's results on every node (engine/runbook/jobs/)."""

    type: str
    with_: dict[str, Any] = field(default_factory=dict)


@dataclass
class Verify:
    """A check run on the node after its fix, and the condition on its result that means it worked."""

    check: Check
    passes: str  # Jinja2 expression over `result`, like a branch's `when`


@dataclass
class Fix:
    title: Text
    body: Text | None
    run: str | None
    effect: str
    verify: Verify | None = None


@dataclass
class Conclusion:
    id: str
    severity: str
    taxonomy: list[str]
    title: Text
    explanation: Text
    fixes: list[Fix]
    see_also: list[str] = field(default_factory=list)
    finding: Text | None = None  # a template over the evidence: the fact, shown first
    # What it rests on: "node" (the node's own evidence) or "job" (an inference about the job
    # from other nodes). A node whose own evidence shows progress never ends at a "job" one.
    basis: str = "node"
    generic: bool = False  # a last resort: no specific cause found (measured by bench/diagnosis.py)


@dataclass
class Signature:
    """A log line that is evidence for one conclusion. `goto` is where triage enters the
    runbook (a step that confirms it, or the conclusion itself); `conclusion` is the failure
    the line shows (it defaults to `goto` when that is a conclusion). A `knock-on` line
    follows from a failure elsewhere (a watchdog timeout after another rank's OOM): triage
    ranks every `cause` before it."""

    pattern: str
    goto: str | None = None
    conclusion: str | None = None
    role: str = "cause"


@dataclass
class ChangelogEntry:
    version: str
    text: Text


@dataclass
class Runbook:
    id: str
    version: str
    title: Text
    summary: Text
    tags: list[str]
    symptoms: list[Text]
    signatures: list[Signature]
    params: dict[str, Param]
    start: str
    steps: dict[str, Step]
    conclusions: dict[str, Conclusion]
    changelog: list[ChangelogEntry]
    path: str  # the file it was loaded from
    digest: str  # sha256 of the file's bytes: what a report says it ran

    def node(self, target: str) -> Step | Conclusion | None:
        """The step or conclusion with id `target` inside this runbook."""
        return self.steps.get(target) or self.conclusions.get(target)
