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

Nodes that answer alike are decided once. Answers are interned by their canonical text (one
object per distinct answer, which also keeps one copy of thousands of equal results in memory),
and a node's history (the results and job parts its steps saw) is a `_Lineage` shared by every
node that answered alike. Within a step's group, nodes with the same history, answer, job part
and parameters replay one decision by identity; where a condition reads the node itself, only
those conditions run per node (one decision per what they find). A node that misses still
shares with nodes whose conditions see the same values (format/inputs.py). Within a round, one
`with:` rendering and one request per history (run/dispatch.py sends each group at once, no
future per check); for the run, one rendering of a conclusion's fixes and finding per history.
Each memo holds the objects its ids name, dies with its group, round or run, and holds at most
MEMO_CAP entries.
"""

from __future__ import annotations

import copy
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
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
from runbook.run.dispatch import CheckPool
from runbook.run.gcpause import full_collections_paused
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
    # Where conditions read the node: the branches whose values make `decided_by`, in order, each
    # with its values when every node of the decision reads the same (None: read per node).
    reads: tuple[tuple[int, dict[str, Any] | None], ...] | None = None


class _History:
    """Nodes that came the same way and answered alike: where they go next, and why."""

    __slots__ = ("keyed", "after", "decisions", "members")

    def __init__(self, keyed: tuple[Any, ...], after: _Lineage) -> None:
        self.keyed, self.after = keyed, after  # `keyed`: the objects whose ids make the key
        # By what the conditions that read the node found on it (() where none does).
        self.decisions: dict[tuple[tuple[bool, str | None], ...], _Decision] = {}
        # Per condition that reads the node: what decides it for all these nodes but for their
        # names (Expression.members), worked out on the first of them.
        self.members: tuple[frozenset[str] | bool | None, ...] | None = None


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
        # By (history, answer, job part) identities: the objects are held in the value, so an id
        # cannot be reused by another object while the memo lives.
        self.histories: dict[tuple[int, int, int, int], _History] = {}

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


@dataclass(slots=True)
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


class _Lineage:
    """What a node's walk has seen so far (its steps' results and job parts), shared by every node
    whose answers were the same: made once per distinct answer, never copied per node."""

    __slots__ = ("seen", "jobs", "job", "steps", "progressing")

    def __init__(self, seen: dict[str, dict[str, Any]], jobs: dict[str, dict[str, Any]],
                 job: dict[str, Any], progressing: bool) -> None:
        self.seen, self.jobs, self.job, self.progressing = seen, jobs, job, progressing
        # The `steps` variable of expressions: one view for all the nodes of this lineage.
        self.steps = {sid: {"result": r, "job": jobs.get(sid, {})} for sid, r in seen.items()}

    def then(self, step_id: str, result: dict[str, Any], job: dict[str, Any] | None) -> _Lineage:
        """This history and one more step (`job`: the step's analysis part, None when it has none)."""
        jobs = {**self.jobs, step_id: job} if job is not None else self.jobs
        return _Lineage({**self.seen, step_id: result}, jobs, self.job if job is None else job,
                        self.progressing or result.get("progressing") is True)


NO_HISTORY = _Lineage({}, {}, {}, False)


@dataclass(slots=True)
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
    # `seen`, `jobs` and `job` above are this lineage's (shared, never changed in place).
    lineage: _Lineage = field(default=NO_HISTORY, repr=False, compare=False)


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

    # Optional: `on_idle()`, called before the walk waits for answers and when it ends, so a
    # listener that buffers what it writes (report/stream.py) can write it out then.


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
        # Per (runbook, step): the paths its conditions / its `with:` templates read (and whether
        # the latter read the node itself).
        self._when_inputs: dict[tuple[str, str], tuple[expr_inputs.Path, ...]] = {}
        self._with_inputs: dict[tuple[str, str], tuple[tuple[expr_inputs.Path, ...], bool]] = {}
        # A conclusion's findings, fixes and verify checks rendered, by template and input key,
        # for the whole run (templates live as long as the library, so their ids are stable).
        self._template_inputs: dict[int, tuple[expr_inputs.Path, ...]] = {}
        self._renderings: dict[Any, Any] = {}
        self._runbook_params: dict[str, dict[str, Any]] = {}
        self._by_node: dict[tuple[str, str], tuple[int, ...]] = {}
        # Per (conclusion, history, parameters): its fixes, verify checks and finding, rendered.
        self._concluded: dict[tuple[int, int, int], tuple[Any, ...]] = {}
        self._conclusion_by_node: dict[tuple[str, str], bool] = {}

    # -- the loop --

    def run(self) -> list[NodeOutcome]:
        deadline = time.monotonic() + self.options.deadline_s
        pool = CheckPool(self.options.forks)
        try:
            with full_collections_paused():
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
            pool.close()
            self._idle()
        return self.outcomes

    def _walking(self) -> list[NodeOutcome]:
        return [o for o in self.outcomes if o.status == WALKING]

    def _round(self, pool: CheckPool, deadline: float) -> None:
        """Send each step's check to the nodes standing there, one batch per distinct request, and
        decide each node as its answer is in (all at once, after the round: `cluster` needs all)."""
        asked: list[NodeOutcome] = []
        batches: dict[Any, tuple[dict[str, Any], float, list[int]]] = {}
        renderings: dict[Any, tuple[Any, dict[str, Any], float]] = {}
        for outcome in self._walking():
            prepared = self._request(outcome, deadline, renderings)
            if prepared is None:
                continue
            key, request, timeout = prepared
            key = (key, outcome.node.transport)  # a batch goes through one transport
            batch = batches.get(key)
            if batch is None:
                batch = batches[key] = (request, timeout, [])
            batch[2].append(len(asked))
            asked.append(outcome)
        self._idle()  # before the checks go out: an answer may land before this thread runs again
        landed: SimpleQueue[tuple[int, ProbeAnswer]] = SimpleQueue()  # this round's answers only
        for request, timeout, tags in batches.values():
            pool.send(self.transport, [asked[t].node for t in tags], request, timeout, tags, landed)
        answers: list[ProbeAnswer | None] = [None] * len(asked)
        waiting = len(asked)
        try:
            while waiting:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    tag, answer = landed.get(timeout=left)
                except Empty:
                    break
                if answers[tag] is None:
                    answers[tag] = answer
                    waiting -= 1
        except KeyboardInterrupt:  # what came back before Ctrl-C is evidence all the same
            self._decide_answered(asked, answers)
            raise
        self._expire([o for o, a in zip(asked, answers, strict=True) if a is None],
                     "the run's deadline passed during a check")
        self._decide_answered(asked, answers)

    def _decide_answered(self, asked: list[NodeOutcome], answers: list[ProbeAnswer | None]) -> None:
        groups: dict[tuple[str, str], list[tuple[NodeOutcome, ProbeAnswer]]] = defaultdict(list)
        for outcome, answer in zip(asked, answers, strict=True):
            if answer is not None and outcome.status == WALKING:
                groups[(outcome.runbook_id, outcome.step_id)].append((outcome, answer))
        for group in groups.values():
            self._decide_group(group)

    def _request(self, outcome: NodeOutcome, deadline: float, renderings: dict[Any, Any],
                 ) -> tuple[Any, dict[str, Any], float] | None:
        """This node's request and timeout, and a key equal for the nodes that get the same one;
        None when its parameters cannot be rendered (the node has failed)."""
        runbook, step, compiled = self._locate(outcome)
        templates = compiled.with_.get(step.id, {})
        where = (runbook.id, step.id)
        known = self._with_inputs.get(where)
        if known is None:
            inputs = expr.value_inputs(templates)
            known = self._with_inputs[where] = (inputs, _reads_node(inputs))
        inputs, reads_node = known
        params = self._params(runbook, outcome.node)
        if not reads_node:  # the same history and parameters give the same request
            key: Any = (where, id(outcome.lineage), id(params))
        else:
            key = (where, expr_inputs.input_key(inputs, self._variables(outcome, runbook)))
        known = renderings.get(key)
        if known is not None:
            return key, known[1], known[2]
        try:
            rendered = expr.render_value(templates, self._variables(outcome, runbook))
        except Exception as exc:  # a template that fails on this node's values
            return self._fail(outcome, ERROR, f"step {step.id}: parameters: {exc}")
        timeout = step.check.timeout or float(load_check(step.check.type).DEFAULT_TIMEOUT)
        timeout = max(0.1, min(timeout, deadline - time.monotonic()))
        request = {"check": step.check.type, "with": _drop_none(_own_copy(rendered)),
                   "step": self._qualified(runbook, step.id)}
        if len(renderings) >= MEMO_CAP:
            return (object(), request, timeout)  # a batch of its own
        renderings[key] = ((outcome.lineage, params), request, timeout)  # held: their ids stay theirs
        return key, request, timeout

    # -- deciding --

    def _decide_group(self, group: list[tuple[NodeOutcome, ProbeAnswer]]) -> None:
        runbook, step, compiled = self._locate(group[0][0])
        # Equal answers become one object: one copy in memory, and one identity to key decisions by.
        results: dict[tuple[bool, str], dict[str, Any]] = {}
        answered: list[tuple[NodeOutcome, ProbeAnswer, dict[str, Any] | None]] = []
        for outcome, answer in group:
            result = None
            if answer.status == "ok":
                result = answer.result or {}
                # the answer's line where the transport kept it (the same line, the same result)
                key = (False, _canonical(result)) if answer.text is None else (True, answer.text)
                result = results.setdefault(key, result)
            answered.append((outcome, answer, result))
        reads = self._condition_inputs(runbook, step, compiled)
        cluster = ([{"node": o.node.name, "result": r} for o, _, r in answered if r is not None]
                   if any(path[0] == "cluster" for path in reads) else [])
        jobs = self._analyse(runbook, step, answered)
        memo = _GroupMemo()
        for outcome, answer, result in answered:
            if result is None:
                status = UNREACHABLE if answer.status == "unreachable" else ERROR
                self._fail(outcome, status, f"step {outcome.step_id}: {answer.error}")
                continue
            self._decide(outcome, answer, result, jobs.get(outcome.node.name) if jobs else None,
                         cluster, memo)

    def _condition_inputs(self, runbook: Runbook, step: Step,
                          compiled: Compiled) -> tuple[expr_inputs.Path, ...]:
        where = (self._qualified(runbook, step.id), step.id)
        if where not in self._when_inputs:
            self._when_inputs[where] = expr_inputs.union(
                compiled.when[(step.id, i)].inputs for i in range(len(step.branches)))
        return self._when_inputs[where]

    def _analyse(self, runbook: Runbook, step: Step,
                 answered: list[tuple[NodeOutcome, ProbeAnswer, dict[str, Any] | None]],
                 ) -> dict[str, dict[str, Any]] | None:
        """Run the step's job-level analysis over every node's answer (None for a node whose
        check failed); each node then sees the job's result as `job`, its own part as `job.node`.
        Returns each node's `job` (equal ones are one object); None when the step has no analysis."""
        if step.analysis is None:
            return None
        from runbook import jobs

        results = {o.node.name: r for o, _, r in answered}
        try:
            result = jobs.run_analysis(step.analysis.type, results, step.analysis.with_)
        except Exception as exc:  # an analysis must never lose the nodes' own results
            result = jobs.failed(step.analysis.type, results, f"{type(exc).__name__}: {exc}")
        self.job_verdicts.append(JobVerdict(self._qualified(runbook, step.id), result))
        shared = {k: v for k, v in result.items() if k != "nodes"}
        parts: dict[str, dict[str, Any]] = {}
        by_id: dict[int, dict[str, Any]] = {}  # an analysis may give nodes alike one part object
        each: dict[str, dict[str, Any]] = {}
        for outcome, _, _ in answered:
            part = result["nodes"].get(outcome.node.name, _NOT_SUSPECT)
            job = by_id.get(id(part))
            if job is None:
                job = by_id[id(part)] = parts.setdefault(_canonical(part), {**shared, "node": part})
            each[outcome.node.name] = job
        return each

    def _decide(self, outcome: NodeOutcome, answer: ProbeAnswer, result: dict[str, Any],
                job: dict[str, Any] | None, cluster: list[Any], memo: _GroupMemo) -> None:
        runbook, step, compiled = self._locate(outcome)
        before = outcome.lineage
        params = self._params(runbook, outcome.node)
        evidence = Evidence(self._qualified(runbook, step.id), step.check.type, result,
                            round(answer.duration_s, 3))
        # Nodes with the same history, answer, job part and parameters share the next lineage and
        # the decision; where conditions read the node itself, one decision per outcome of those.
        key = (id(before), id(result), id(job), id(params))
        known = memo.histories.get(key)
        if known is None:
            known = _History((before, result, job, params), before.then(step.id, result, job))
            if len(memo.histories) < MEMO_CAP:
                memo.histories[key] = known
        by_node = self._node_branches(runbook, step, compiled)
        made: list[dict[str, Any]] = []  # the node's variables, made only when something reads them

        def variables() -> dict[str, Any]:
            if not made:
                made.append(self._decision_variables(outcome, runbook, before, result, cluster, job))
            return made[0]

        seen_by_node: tuple[tuple[bool, str | None], ...] = ()
        if by_node:
            if known.members is None:
                known.members = tuple(compiled.when[(step.id, i)].members(variables()) for i in by_node)
            seen_by_node = self._seen_by_node(outcome, known.members, by_node, step, compiled, variables)
        decision = known.decisions.get(seen_by_node)
        if decision is not None:
            evidence.when, evidence.branch = decision.when, decision.branch
            evidence.decided_by = (decision.decided_by if decision.reads is None else
                                   _values_read(decision.reads, step, compiled, outcome.node, variables))
            if decision.notes:
                evidence.notes.extend(decision.notes)
            target = decision.target
        else:
            progressing = runbook if before.progressing or result.get("progressing") is True else None
            if by_node:  # only the conditions that do not read the node are shared by input key
                target = self._choose(step, compiled, variables(), evidence, progressing, memo)
            else:
                target = self._choose_once(step, compiled, variables(), evidence, progressing, memo)
            if len(known.decisions) < MEMO_CAP:
                reads = _reads_of(evidence.branch, step, compiled, variables(), by_node) if by_node else None
                known.decisions[seen_by_node] = _Decision(
                    target, evidence.when, evidence.branch, tuple(evidence.notes), evidence.decided_by, reads)
        outcome.lineage = known.after
        outcome.seen, outcome.jobs, outcome.job = known.after.seen, known.after.jobs, known.after.job
        outcome.evidence.append(evidence)
        outcome.path.append(evidence.step)
        evidence.goto = target  # before the listeners: a live report shows where the node goes
        for listener in self.listeners:
            listener.on_step(outcome, evidence)
        if target is None:
            why = "the check timed out" if result.get("timed_out") else "no branch matched"
            self._fail(outcome, TIMEOUT if result.get("timed_out") else ERROR,
                       f"step {step.id}: {why} and no branch handles it")
            return
        self._move(outcome, runbook, target)

    @staticmethod
    def _seen_by_node(outcome: NodeOutcome, members: tuple[frozenset[str] | bool | None, ...],
                      by_node: tuple[int, ...], step: Step, compiled: Compiled,
                      variables: Callable[[], dict[str, Any]]) -> tuple[tuple[bool, str | None], ...]:
        """What each condition that reads the node finds on this one: a set lookup where its
        `Expression.members` decided it for the node's history, else an evaluation."""
        name = _name_of(outcome.node)
        seen = []
        for i, found in zip(by_node, members, strict=True):
            if found is None or type(name) is not str:
                seen.append(_evaluate(compiled.when[(step.id, i)], variables()))
            else:
                seen.append((found is not False and name in found, None))  # type: ignore[operator]
        return tuple(seen)

    def _decision_variables(self, outcome: NodeOutcome, runbook: Runbook, before: _Lineage,
                            result: dict[str, Any], cluster: list[Any],
                            job: dict[str, Any] | None) -> dict[str, Any]:
        return {**self._variables(outcome, runbook, before), "result": result, "cluster": cluster,
                "job": before.job if job is None else job}

    def _node_branches(self, runbook: Runbook, step: Step, compiled: Compiled) -> tuple[int, ...]:
        """The branches whose condition reads the node itself (`node.name in ...`)."""
        where = (runbook.id, step.id)
        known = self._by_node.get(where)
        if known is None:
            known = self._by_node[where] = tuple(i for i in range(len(step.branches))
                                                 if _reads_node(compiled.when[(step.id, i)].inputs))
        return known

    def _choose_once(self, step: Step, compiled: Compiled, variables: dict[str, Any], evidence: Evidence,
                     progressing_in: Runbook | None, memo: _GroupMemo) -> str | None:
        """`_choose`, or the decision already made in this group for a node whose conditions see
        the same values (and that is as progressing and as timed out as this one)."""
        reads = self._when_inputs[(evidence.step, step.id)]
        if _reads_node(reads):
            # A condition reads the node itself (`node.name in ...`): no two nodes share this key,
            # so only the conditions that do not are shared.
            return self._choose(step, compiled, variables, evidence, progressing_in, memo)
        key = (progressing_in is not None, bool(evidence.result.get("timed_out")),
               expr_inputs.input_key(reads, variables, _SAME_IN_GROUP))
        decision = memo.decisions.get(key)
        if decision is None:
            target = self._choose(step, compiled, variables, evidence, progressing_in, memo)
            if len(memo.decisions) < MEMO_CAP:
                memo.decisions[key] = _Decision(target, evidence.when, evidence.branch, tuple(evidence.notes),
                                                evidence.decided_by)
            return target
        evidence.when, evidence.branch = decision.when, decision.branch
        evidence.notes.extend(decision.notes)
        evidence.decided_by = decision.decided_by  # shared, never changed once decided
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
            self._conclude(outcome, runbook, conclusion)
            self._done(outcome)
        elif len(outcome.path) >= self.options.max_steps:
            self._fail(outcome, ERROR, f"walked {len(outcome.path)} steps without a conclusion "
                       "(a loop in the tree?)")

    def _conclude(self, outcome: NodeOutcome, runbook: Runbook, conclusion: Conclusion) -> None:
        """The conclusion's fix commands, verify checks and finding rendered for this node: once
        per history and parameters where none of them reads the node itself."""
        variables = self._variables(outcome, runbook)
        key = (id(conclusion), id(outcome.lineage), id(variables["params"]))
        by_node = self._conclusion_reads_node(runbook, conclusion)
        known = None if by_node else self._concluded.get(key)
        if known is None:
            fixes = self._render_fixes(runbook, conclusion, variables)
            verifies = self._render_verifies(runbook, conclusion, variables)
            finding = self._render_finding(runbook, conclusion, variables)
            if not by_node and len(self._concluded) < MEMO_CAP:
                held = (conclusion, outcome.lineage, variables["params"])  # their ids stay theirs
                self._concluded[key] = (held, fixes, verifies, finding)
        else:
            _, fixes, shared, finding = known
            verifies = [None if v is None else {**v, "with": _own_copy(v["with"]), "node": variables["node"]}
                        for v in shared]
        outcome.fix_commands, outcome.fix_verifies, outcome.finding = fixes, verifies, finding

    def _conclusion_reads_node(self, runbook: Runbook, conclusion: Conclusion) -> bool:
        where = (runbook.id, conclusion.id)
        known = self._conclusion_by_node.get(where)
        if known is None:
            compiled = self.library.by_id[runbook.id].compiled
            templates = [compiled.findings.get(conclusion.id)]
            for i in range(len(conclusion.fixes)):
                templates += [compiled.fix_runs.get((conclusion.id, i)),
                              compiled.fix_verify_with.get((conclusion.id, i))]
            known = self._conclusion_by_node[where] = any(
                _reads_node(self._inputs_of(t)) for t in templates if t)
        return known

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
        key = (id(template), expr_inputs.input_key(self._inputs_of(template), variables))
        if key in self._renderings:
            return self._renderings[key]
        rendered = render()
        if len(self._renderings) < MEMO_CAP:
            self._renderings[key] = rendered
        return rendered

    def _inputs_of(self, template: Any) -> tuple[expr_inputs.Path, ...]:
        inputs = self._template_inputs.get(id(template))
        if inputs is None:
            inputs = self._template_inputs[id(template)] = (
                template.inputs if hasattr(template, "inputs") else expr.value_inputs(template))
        return inputs

    def _locate(self, outcome: NodeOutcome) -> tuple[Runbook, Step, Compiled]:
        loaded = self.library.by_id[outcome.runbook_id]
        assert loaded.runbook is not None
        return loaded.runbook, loaded.runbook.steps[outcome.step_id], loaded.compiled

    def _qualified(self, runbook: Runbook, step_id: str) -> str:
        return step_id if runbook.id == self.runbook.id else f"{runbook.id}:{step_id}"

    def _variables(self, outcome: NodeOutcome, runbook: Runbook,
                   lineage: _Lineage | None = None) -> dict[str, Any]:
        lineage = lineage or outcome.lineage
        node = {"name": outcome.node.name, **{k: v for k, v in outcome.node.vars.items()
                                              if k != "params"}}
        return {"params": self._params(runbook, outcome.node), "node": node, "steps": lineage.steps,
                "result": {}, "cluster": [], "job": lineage.job}

    def _params(self, runbook: Runbook, node: Node) -> dict[str, Any]:
        """The runbook's parameters for this node (one dict per runbook for the nodes that set
        none of their own; expressions cannot change it)."""
        node_params = node.vars.get("params")
        if not node_params:
            known = self._runbook_params.get(runbook.id)
            if known is not None:
                return known
        params = {name: p.default for name, p in runbook.params.items()}
        params.update({k: v for k, v in {**self.user_params, **(node_params or {})}.items()
                       if k in runbook.params})
        if not node_params:
            self._runbook_params[runbook.id] = params
        return params

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

    def _idle(self) -> None:
        for listener in self.listeners:
            idle = getattr(listener, "on_idle", None)
            if idle is not None:
                idle()


def _name_of(node: Node) -> Any:
    """`node.name` as a condition sees it: the node's variables may set their own `name`."""
    return node.vars.get("name", node.name)


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


def _reads_node(paths: Sequence[expr_inputs.Path]) -> bool:
    return any(path[0] == "node" for path in paths)


def _evaluate(expression: expr.Expression, variables: dict[str, Any]) -> tuple[bool, str | None]:
    try:
        return expr.truthy(expression.evaluate(variables)), None
    except Exception as exc:  # noted on the node by `_choose`, as any condition's error
        return False, str(exc)


_NOT_SUSPECT: dict[str, Any] = {"suspect": False}  # a node the analysis says nothing of
_PER_NODE = object()  # a value of `decided_by` read on each node (its path starts at `node`)
_NOT_READ = object()  # a path whose value is no evidence (missing, or empty)
Reads = tuple[tuple[int, tuple[tuple[str, Any], ...]], ...]


def _reads_of(branch: int | None, step: Step, compiled: Compiled, variables: dict[str, Any],
              by_node: tuple[int, ...]) -> Reads | None:
    """How `_choose` made `decided_by` (the matched branch's values, or every branch's when the
    default was taken): each branch's paths in order, with the value every node of the decision
    reads, or _PER_NODE for a path from `node`. None when no path is from `node` (`decided_by`
    is then the same for every node)."""
    if branch is None and variables["result"].get("timed_out"):
        return None  # a hang no branch handles: nothing was read into evidence
    chosen = (branch,) if branch is not None else tuple(range(len(step.branches)))
    if not any(i in by_node for i in chosen):
        return None
    reads = []
    for i in chosen:
        expression = compiled.when[(step.id, i)]
        reads.append((i, tuple(
            (path, _PER_NODE if from_node(path) else _read_one(expression, path, variables))
            for path in expression.reads)))
    return tuple(reads)


def _values_read(reads: Reads, step: Step, compiled: Compiled, node: Node,
                 variables: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """`decided_by` as `_choose` makes it, from the shared values and this node's own (its name
    read directly; the node's variables made only for another path from `node`)."""
    values: dict[str, Any] = {}
    for i, paths in reads:
        for path, value in paths:
            if value is _PER_NODE:
                value = (_name_of(node) if path == "node.name"
                         else _read_one(compiled.when[(step.id, i)], path, variables()))
            if value is not _NOT_READ:
                values[path] = value
    return values


def from_node(path: str) -> bool:
    """Whether an expression path reads the node itself (`node.name`)."""
    return path == "node" or path.startswith(("node.", "node[", "node |"))


def _canonical(value: Any) -> str:
    """Text equal for equal answers (JSON values: `repr` tells 1, 1.0, True and '1' apart); two
    answers with their keys in another order are merely not shared."""
    return repr(value)


def _read_values(expression: expr.Expression, variables: dict[str, Any]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for path in expression.reads:
        value = _read_one(expression, path, variables)
        if value is not _NOT_READ:
            values[path] = value
    return values


def _read_one(expression: expr.Expression, path: str, variables: dict[str, Any]) -> Any:
    """The value at one of the paths an expression reads, as evidence; _NOT_READ when missing or
    empty (an empty value says nothing, unless it is a zero or false that decided)."""
    try:
        value = expression.read(path, variables)
    except Exception:
        return _NOT_READ
    if expr.truthy(value) or value in (0, False, "", 0.0):
        return value if not isinstance(value, (dict, list)) else _short(value)
    return _NOT_READ


def _short(value: Any) -> Any:
    text = _repr_upto(value, 121)
    return value if len(text) <= 120 else text[:117] + "..."


def _repr_upto(value: Any, limit: int) -> str:
    """`repr(value)`, or a prefix of it at least `limit` long: a condition reading `cluster` keeps
    its first characters as evidence on every node, which must not cost the whole cluster's text."""
    if type(value) is list:
        opening, closing, items = "[", "]", value
    elif type(value) is dict:
        opening, closing, items = "{", "}", value.items()
    else:
        return repr(value)
    parts, length = [opening], 1
    for n, item in enumerate(items):
        if length > limit:
            return "".join(parts)
        text = (f"{_repr_upto(item[0], limit)}: {_repr_upto(item[1], limit)}" if opening == "{"
                else _repr_upto(item, limit))
        parts.append((", " if n else "") + text)
        length += len(parts[-1])
    parts.append(closing)
    return "".join(parts)
