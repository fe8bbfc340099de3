"""The engine: a level-synchronous walk of a runbook tree over many nodes.

Each round groups the nodes still walking by the step they stand on, runs that
step's check on all of them in parallel, then decides each node's next step
from its own `result` and the `cluster` of results at that step. Checks that
fail, hang or cannot reach a node become data on that node; the others go on.

Evidence before inference: a node's own evidence outranks what a job-level analysis infers
about it. A branch leading to a conclusion whose `basis` is `job` (e.g. "waiting for the
missing ranks") is skipped for a node whose own results show it progressing (`progressing:
true`, e.g. its log moves), with a note saying so; the job's verdict still heads the report
and is kept on every node it concerns (`NodeOutcome.jobs`).

Nodes that answer alike are decided once: within a step's group, nodes whose conditions would
see the same values (format/inputs.py) share one decision, and within a round, nodes whose
`with:` templates would see the same values share one rendering. Each memo is dropped with its
group or round and holds at most MEMO_CAP entries.
"""

from __future__ import annotations

import copy
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from queue import Empty, SimpleQueue
from typing import Any, Protocol

from runbook.checks import load_check
from runbook.format import expr
from runbook.format import inputs as expr_inputs
from runbook.format.loader import Compiled
from runbook.format.model import Conclusion, Runbook, Step
from runbook.library.runbooks import Library
from runbook.transports import Node, ProbeAnswer, Transport

WALKING, CONCLUDED, UNREACHABLE, TIMEOUT, ERROR = (
    "walking", "concluded", "unreachable", "timeout", "error")
MEMO_CAP = 4096  # distinct decisions (or renderings) kept per step group (or round)
_SAME_IN_GROUP = frozenset({"cluster"})  # one list for every node of a step's group


@dataclass(frozen=True)
class _Decision:
    """What `_choose` decided for one node, replayed on every node whose conditions see the same."""

    target: str | None
    when: str | None
    branch: int | None
    notes: tuple[str, ...]
    decided_by: dict[str, Any]


@dataclass
class _Condition:
    """One condition on one input key: whether it held (or the error), and the values it read."""

    evaluated: bool = False
    matched: bool = False
    error: str | None = None
    read: dict[str, Any] | None = None


class _GroupMemo:
    """A step group's decisions and conditions, each worked out once per distinct input key."""

    def __init__(self) -> None:
        self.decisions: dict[Any, _Decision] = {}
        self._conditions: dict[Any, _Condition] = {}

    def condition(self, expression: expr.Expression, variables: dict[str, Any],
                  evaluate: bool = True) -> _Condition:
        key = (id(expression), expr_inputs.input_key(expression.inputs, variables, _SAME_IN_GROUP))
        known = self._conditions.get(key)
        if known is None:
            known = _Condition()
            if len(self._conditions) < MEMO_CAP:
                self._conditions[key] = known
        if evaluate and not known.evaluated:
            try:
                known.matched = expr.truthy(expression.evaluate(variables))
            except Exception as exc:  # the caller notes it on the node and goes on
                known.error = str(exc)
            known.evaluated = True
        return known

    def read_values(self, condition: _Condition, expression: expr.Expression,
                    variables: dict[str, Any]) -> dict[str, Any]:
        if condition.read is None:
            condition.read = _read_values(expression, variables)
        return dict(condition.read)


@dataclass
class Evidence:
    """One step on one node: the check's result and the branch it decided."""

    step: str
    check: str
    result: dict[str, Any]
    duration_s: float
    goto: str | None = None
    when: str | None = None  # the condition that matched; None when the default was taken
    branch: int | None = None  # index of the matched branch; None when the default was taken
    decided_by: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@dataclass
class NodeOutcome:
    node: Node
    status: str = WALKING
    runbook_id: str = ""
    step_id: str = ""
    path: list[str] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)
    conclusion: Conclusion | None = None
    conclusion_runbook: Runbook | None = None
    reason: str | None = None
    seen: dict[str, dict[str, Any]] = field(default_factory=dict)  # step -> result, for `steps`
    fix_commands: list[str | None] = field(default_factory=list)  # rendered for this node
    # Per fix: the verify check's request rendered for this node ({"check", "with", "timeout"}).
    fix_verifies: list[dict[str, Any] | None] = field(default_factory=list)
    # The last job-level analysis this node took part in: the job's result, with `node` its own part.
    job: dict[str, Any] = field(default_factory=dict)
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)  # step -> `job` at that step
    finding: dict[str, str] = field(default_factory=dict)  # the conclusion's finding, rendered
    # The expression variables of the step under way, made when its check is sent and read again
    # when its branches are decided (the same for both: only `result`, `cluster`, `job` differ).
    step_variables: dict[str, Any] | None = field(default=None, repr=False)


@dataclass
class JobVerdict:
    """What one job-level analysis found at one step, over the nodes that stood there."""

    step: str  # qualified: runbook:step
    result: dict[str, Any]  # jobs.run_analysis's JobResult


@dataclass
class WalkOptions:
    forks: int = 64
    deadline_s: float = 300.0
    max_steps: int = 64  # per node: a loop in a tree cannot run forever


class Listener(Protocol):
    def on_step(self, outcome: NodeOutcome, evidence: Evidence) -> None: ...

    def on_node_done(self, outcome: NodeOutcome) -> None: ...


class Walk:
    def __init__(self, library: Library, runbook: Runbook, nodes: list[Node],
                 transport: Transport, params: dict[str, Any],
                 options: WalkOptions | None = None, listeners: list[Listener] | None = None,
                 entry: str | None = None) -> None:
        self.library, self.runbook, self.transport = library, runbook, transport
        self.options = options or WalkOptions()
        self.listeners = listeners or []
        self.user_params = params
        start = entry or runbook.start
        self.outcomes = [NodeOutcome(n, runbook_id=runbook.id, step_id=start) for n in nodes]
        self.job_verdicts: list[JobVerdict] = []
        # Per (runbook, step): the paths its conditions / its `with:` templates read.
        self._when_inputs: dict[tuple[str, str], tuple[expr_inputs.Path, ...]] = {}
        self._with_inputs: dict[tuple[str, str], tuple[expr_inputs.Path, ...]] = {}
        # A conclusion's findings, fixes and verify checks rendered, by template and input key,
        # for the whole run (templates live as long as the library, so their ids are stable).
        self._template_inputs: dict[int, tuple[expr_inputs.Path, ...]] = {}
        self._renderings: dict[Any, Any] = {}

    # -- the loop --

    def run(self) -> list[NodeOutcome]:
        deadline = time.monotonic() + self.options.deadline_s
        pool = ThreadPoolExecutor(max_workers=max(1, self.options.forks),
                                  thread_name_prefix="runbook-check")
        try:
            for outcome in self.outcomes:
                self._settle(outcome)
            while self._walking():
                if time.monotonic() >= deadline:
                    self._expire(self._walking(), "the run's deadline passed")
                    break
                self._round(pool, deadline)
        except KeyboardInterrupt:
            self._expire(self._walking(), "interrupted")
            raise
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        return self.outcomes

    def _walking(self) -> list[NodeOutcome]:
        return [o for o in self.outcomes if o.status == WALKING]

    def _round(self, pool: ThreadPoolExecutor, deadline: float) -> None:
        futures: dict[Future[ProbeAnswer], NodeOutcome] = {}
        renderings: dict[Any, dict[str, Any]] = {}
        for outcome in self._walking():
            future = self._submit(pool, outcome, deadline, renderings)
            if future is not None:
                futures[future] = outcome
        answers: dict[int, ProbeAnswer] = {}
        # Each answer is queued as it lands: waiting on the whole set of futures again after
        # every answer (concurrent.futures.wait) would cost N per answer, N squared per round.
        landed: SimpleQueue[Future[ProbeAnswer]] = SimpleQueue()
        for future in futures:
            future.add_done_callback(landed.put)
        try:
            while len(answers) < len(futures):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    future = landed.get(timeout=left)
                except Empty:
                    break
                answers[id(futures[future])] = future.result()
        except KeyboardInterrupt:  # what came back before Ctrl-C is evidence all the same
            self._decide_answered(futures.values(), answers)
            raise
        self._expire([o for o in futures.values() if id(o) not in answers],
                     "the run's deadline passed during a check")
        self._decide_answered(futures.values(), answers)

    def _decide_answered(self, asked: Iterable[NodeOutcome], answers: dict[int, ProbeAnswer]) -> None:
        groups: dict[tuple[str, str], list[NodeOutcome]] = defaultdict(list)
        for outcome in asked:
            if id(outcome) in answers:
                groups[(outcome.runbook_id, outcome.step_id)].append(outcome)
        for group in groups.values():
            self._decide_group(group, answers)

    def _submit(self, pool: ThreadPoolExecutor, outcome: NodeOutcome, deadline: float,
                renderings: dict[Any, dict[str, Any]]) -> Future[ProbeAnswer] | None:
        runbook, step, compiled = self._locate(outcome)
        outcome.step_variables = self._variables(outcome, runbook)
        templates = compiled.with_.get(step.id, {})
        where = (runbook.id, step.id)
        if where not in self._with_inputs:
            self._with_inputs[where] = expr.value_inputs(templates)
        key = (where, expr_inputs.input_key(self._with_inputs[where], outcome.step_variables))
        rendered = renderings.get(key)
        if rendered is not None:
            rendered = _own_copy(rendered)  # each request its own: a check may change its parameters
        else:
            try:
                rendered = expr.render_value(templates, outcome.step_variables)
            except Exception as exc:  # a template that fails on this node's values
                return self._fail(outcome, ERROR, f"step {step.id}: parameters: {exc}")
            if len(renderings) < MEMO_CAP:
                renderings[key] = _own_copy(rendered)
        timeout = step.check.timeout or float(load_check(step.check.type).DEFAULT_TIMEOUT)
        timeout = max(0.1, min(timeout, deadline - time.monotonic()))
        request = {"check": step.check.type, "with": _drop_none(rendered),
                   "step": self._qualified(runbook, step.id)}
        return pool.submit(self.transport.run_check, outcome.node, request, timeout)

    # -- deciding --

    def _decide_group(self, group: list[NodeOutcome], answers: dict[int, ProbeAnswer]) -> None:
        cluster = [{"node": o.node.name, "result": answers[id(o)].result}
                   for o in group if answers[id(o)].status == "ok"]
        self._analyse(group, answers)
        memo = _GroupMemo()
        for outcome in group:
            answer = answers[id(outcome)]
            if answer.status != "ok":
                status = UNREACHABLE if answer.status == "unreachable" else ERROR
                self._fail(outcome, status, f"step {outcome.step_id}: {answer.error}")
                continue
            self._decide(outcome, answer, cluster, memo)

    def _analyse(self, group: list[NodeOutcome], answers: dict[int, ProbeAnswer]) -> None:
        """Run the step's job-level analysis over every node's answer (None for a node whose
        check failed); each node then sees the job's result as `job`, its own part as `job.node`."""
        runbook, step, _ = self._locate(group[0])
        if step.analysis is None:
            return
        from runbook import jobs

        results = {o.node.name: (answers[id(o)].result or {}) if answers[id(o)].status == "ok" else None
                   for o in group}
        try:
            result = jobs.run_analysis(step.analysis.type, results, step.analysis.with_)
        except Exception as exc:  # an analysis must never lose the nodes' own results
            result = jobs.failed(step.analysis.type, results, f"{type(exc).__name__}: {exc}")
        self.job_verdicts.append(JobVerdict(self._qualified(runbook, step.id), result))
        shared = {k: v for k, v in result.items() if k != "nodes"}
        for outcome in group:
            outcome.job = {**shared, "node": result["nodes"].get(outcome.node.name, {"suspect": False})}
            outcome.jobs[step.id] = outcome.job

    def _decide(self, outcome: NodeOutcome, answer: ProbeAnswer, cluster: list[Any],
                memo: _GroupMemo) -> None:
        runbook, step, compiled = self._locate(outcome)
        result = answer.result or {}
        evidence = Evidence(self._qualified(runbook, step.id), step.check.type, result,
                            round(answer.duration_s, 3))
        variables = {**(outcome.step_variables or self._variables(outcome, runbook)), "result": result,
                     "cluster": cluster, "job": outcome.job}
        outcome.step_variables = None
        progressing = any(e.result.get("progressing") is True for e in outcome.evidence) or (
            result.get("progressing") is True)
        target = self._choose_once(step, compiled, variables, evidence, runbook if progressing else None,
                                   memo)
        outcome.evidence.append(evidence)
        outcome.path.append(evidence.step)
        outcome.seen[step.id] = result
        for listener in self.listeners:
            listener.on_step(outcome, evidence)
        if target is None:
            why = "the check timed out" if result.get("timed_out") else "no branch matched"
            self._fail(outcome, TIMEOUT if result.get("timed_out") else ERROR,
                       f"step {step.id}: {why} and no branch handles it")
            return
        evidence.goto = target
        self._move(outcome, runbook, target)

    def _choose_once(self, step: Step, compiled: Compiled, variables: dict[str, Any], evidence: Evidence,
                     progressing_in: Runbook | None, memo: _GroupMemo) -> str | None:
        """`_choose`, or the decision already made in this group for a node whose conditions see
        the same values (and that is as progressing and as timed out as this one)."""
        where = (evidence.step, step.id)
        if where not in self._when_inputs:
            self._when_inputs[where] = expr_inputs.union(
                compiled.when[(step.id, i)].inputs for i in range(len(step.branches)))
        if any(path[0] == "node" for path in self._when_inputs[where]):
            # A condition reads the node itself (`node.name in ...`): no two nodes share this key,
            # so only the conditions that do not are shared.
            return self._choose(step, compiled, variables, evidence, progressing_in, memo)
        key = (progressing_in is not None, bool(evidence.result.get("timed_out")),
               expr_inputs.input_key(self._when_inputs[where], variables, _SAME_IN_GROUP))
        decision = memo.decisions.get(key)
        if decision is None:
            target = self._choose(step, compiled, variables, evidence, progressing_in, memo)
            if len(memo.decisions) < MEMO_CAP:
                memo.decisions[key] = _Decision(target, evidence.when, evidence.branch, tuple(evidence.notes),
                                                dict(evidence.decided_by))
            return target
        evidence.when, evidence.branch = decision.when, decision.branch
        evidence.notes.extend(decision.notes)
        evidence.decided_by = dict(decision.decided_by)
        return decision.target

    def _choose(self, step: Step, compiled: Compiled, variables: dict[str, Any],
                evidence: Evidence, progressing_in: Runbook | None = None,
                memo: _GroupMemo | None = None) -> str | None:
        """The first branch whose condition holds; with `progressing_in` (the node's own evidence
        shows it moving), branches into a `basis: job` conclusion of that runbook are skipped."""
        memo = memo or _GroupMemo()
        conditions: dict[int, _Condition] = {}  # looked up once, read again if the default is taken
        for i, branch in enumerate(step.branches):
            if progressing_in is not None and self._inferred(progressing_in, branch.goto):
                evidence.notes.append(f"{branch.goto}: skipped, this node's own evidence shows it "
                                      "progressing (evidence before inference)")
                continue
            expression = compiled.when[(step.id, i)]
            outcome = conditions[i] = memo.condition(expression, variables)
            if outcome.error is not None:  # e.g. comparing a field this result lacks
                evidence.notes.append(f"{branch.when}: {outcome.error}")
                continue
            if outcome.matched:
                evidence.when, evidence.branch = branch.when, i
                evidence.decided_by = memo.read_values(outcome, expression, variables)
                return branch.goto
        if evidence.result.get("timed_out"):
            return None  # a hang must be handled explicitly, never by the default
        # The default was taken: what every condition read is the evidence for it.
        for i in range(len(step.branches)):
            expression = compiled.when[(step.id, i)]
            condition = conditions.get(i) or memo.condition(expression, variables, evaluate=False)
            evidence.decided_by.update(memo.read_values(condition, expression, variables))
        return step.default

    def _inferred(self, runbook: Runbook, target: str) -> bool:
        """Whether `target` is a conclusion resting on an inference about the job."""
        rid, cid = _split_target(runbook, target)
        book = runbook if rid == runbook.id else self.library.get(rid)
        conclusion = book.conclusions.get(cid) if book else None
        return conclusion is not None and conclusion.basis == "job"

    def _move(self, outcome: NodeOutcome, runbook: Runbook, target: str) -> None:
        rid, step_id = _split_target(runbook, target)
        if step_id == "start":
            other = self.library.get(rid)
            step_id = other.start if other else step_id
        outcome.runbook_id, outcome.step_id = rid, step_id
        self._settle(outcome)

    def _settle(self, outcome: NodeOutcome) -> None:
        """Conclude a node standing on a conclusion; stop one that walked too far."""
        runbook = self.library.get(outcome.runbook_id)
        if runbook is None:
            self._fail(outcome, ERROR, f"runbook {outcome.runbook_id!r} is not loaded")
            return
        conclusion = runbook.conclusions.get(outcome.step_id)
        if conclusion is not None:
            outcome.status, outcome.conclusion, outcome.conclusion_runbook = (
                CONCLUDED, conclusion, runbook)
            variables = self._variables(outcome, runbook)
            outcome.fix_commands = self._render_fixes(runbook, conclusion, variables)
            outcome.fix_verifies = self._render_verifies(runbook, conclusion, variables)
            outcome.finding = self._render_finding(runbook, conclusion, variables)
            self._done(outcome)
        elif len(outcome.path) >= self.options.max_steps:
            self._fail(outcome, ERROR, f"walked {len(outcome.path)} steps without a conclusion "
                       "(a loop in the tree?)")

    def _render_finding(self, runbook: Runbook, conclusion: Conclusion,
                        variables: dict[str, Any]) -> dict[str, str]:
        """The conclusion's `finding` rendered from this node's evidence, per language; empty
        when it has none or the evidence lacks what it names."""
        template = self.library.by_id[runbook.id].compiled.findings.get(conclusion.id)
        if not template:
            return {}
        try:
            rendered = self._render_once(template, variables, lambda: expr.render_value(template, variables))
        except Exception:  # a finding is a courtesy: its absence must not fail the node
            return {}
        return {lang: str(text) for lang, text in rendered.items() if text not in (None, "")}

    def _render_fixes(self, runbook: Runbook, conclusion: Conclusion,
                      variables: dict[str, Any]) -> list[str | None]:
        compiled = self.library.by_id[runbook.id].compiled
        commands: list[str | None] = []
        for i, _fix in enumerate(conclusion.fixes):
            template = compiled.fix_runs.get((conclusion.id, i))
            try:
                commands.append(self._render_once(template, variables, partial(template.render, **variables))
                                if template else None)
            except Exception as exc:
                commands.append(f"# cannot render this command on this node: {exc}")
        return commands

    def _render_verifies(self, runbook: Runbook, conclusion: Conclusion,
                         variables: dict[str, Any]) -> list[dict[str, Any] | None]:
        compiled = self.library.by_id[runbook.id].compiled
        requests: list[dict[str, Any] | None] = []
        for i, fix in enumerate(conclusion.fixes):
            template = compiled.fix_verify_with.get((conclusion.id, i))
            if fix.verify is None or template is None:
                requests.append(None)
                continue
            try:
                rendered = _own_copy(_drop_none(self._render_once(
                    template, variables, lambda t=template: expr.render_value(t, variables))))
            except Exception as exc:  # reported as a verify that could not run
                rendered = {"__error__": f"cannot render the verify check on this node: {exc}"}
            timeout = fix.verify.check.timeout or float(load_check(fix.verify.check.type).DEFAULT_TIMEOUT)
            requests.append({"check": fix.verify.check.type, "with": rendered, "timeout": timeout,
                             "params": variables["params"], "node": variables["node"]})
        return requests

    # -- helpers --

    def _render_once(self, template: Any, variables: dict[str, Any], render: Callable[[], Any]) -> Any:
        """`render()`, or what it gave for a node whose variables `template` reads are the same
        (a conclusion's finding and fixes, for the thousands of nodes that reach it alike)."""
        inputs = self._template_inputs.get(id(template))
        if inputs is None:
            inputs = self._template_inputs[id(template)] = (
                template.inputs if hasattr(template, "inputs") else expr.value_inputs(template))
        key = (id(template), expr_inputs.input_key(inputs, variables))
        if key in self._renderings:
            return self._renderings[key]
        rendered = render()
        if len(self._renderings) < MEMO_CAP:
            self._renderings[key] = rendered
        return rendered

    def _locate(self, outcome: NodeOutcome) -> tuple[Runbook, Step, Compiled]:
        loaded = self.library.by_id[outcome.runbook_id]
        assert loaded.runbook is not None
        return loaded.runbook, loaded.runbook.steps[outcome.step_id], loaded.compiled

    def _qualified(self, runbook: Runbook, step_id: str) -> str:
        return step_id if runbook.id == self.runbook.id else f"{runbook.id}:{step_id}"

    def _variables(self, outcome: NodeOutcome, runbook: Runbook) -> dict[str, Any]:
        params = {name: p.default for name, p in runbook.params.items()}
        node_params = outcome.node.vars.get("params") or {}
        params.update({k: v for k, v in {**self.user_params, **node_params}.items()
                       if k in runbook.params})
        steps = {sid: {"result": r, "job": outcome.jobs.get(sid, {})} for sid, r in outcome.seen.items()}
        node = {"name": outcome.node.name, **{k: v for k, v in outcome.node.vars.items()
                                              if k != "params"}}
        return {"params": params, "node": node, "steps": steps, "result": {}, "cluster": [],
                "job": outcome.job}

    def _fail(self, outcome: NodeOutcome, status: str, reason: str) -> None:
        outcome.status, outcome.reason = status, reason
        self._done(outcome)
        return None

    def _expire(self, outcomes: list[NodeOutcome], why: str) -> None:
        for outcome in outcomes:
            if outcome.status == WALKING:
                self._fail(outcome, TIMEOUT, f"step {outcome.step_id}: {why}")

    def _done(self, outcome: NodeOutcome) -> None:
        for listener in self.listeners:
            listener.on_node_done(outcome)


def _split_target(runbook: Runbook, target: str) -> tuple[str, str]:
    """A goto as (runbook id, step or conclusion id): `other:step` names another runbook."""
    rid, _, name = target.rpartition(":")
    return (rid or runbook.id), name


def _own_copy(rendered: dict[str, Any]) -> dict[str, Any]:
    """A copy of rendered parameters that shares nothing changeable (most values are text)."""
    return {k: copy.deepcopy(v) if isinstance(v, (dict, list, set)) else v for k, v in rendered.items()}


def _drop_none(params: dict[str, Any]) -> dict[str, Any]:
    """Parameters whose template rendered to nothing are left to the check's defaults."""
    return {k: v for k, v in params.items() if v is not None}


def _read_values(expression: expr.Expression, variables: dict[str, Any]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for path in expression.reads:
        try:
            value = expression.read(path, variables)
        except Exception:
            continue
        if expr.truthy(value) or value in (0, False, "", 0.0):
            values[path] = value if not isinstance(value, (dict, list)) else _short(value)
    return values


def _short(value: Any) -> Any:
    text = repr(value)
    return value if len(text) <= 120 else text[:117] + "..."
