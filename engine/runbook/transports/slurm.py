"""The Slurm transport: checks run inside a job's own allocation, one `srun` per round.

On clusters where users may not SSH to a compute node unless they have a job there
(`pam_slurm_adopt`), the handle on a hung run is its job id. Every node of a round asks for
the same step at about the same time; the first to ask gathers the others for a moment, then
runs ONE step in the job for all of them:

    srun --jobid ID --overlap --nodes N --ntasks-per-node 1 --nodelist a,b --input all \\
         --job-name runbook-probe-XXXX python3 -c BOOTSTRAP

srun fans out by itself. Every task reads the same stdin (the requests of every node, and the
probe bundle), runs the probe with its own node's request (SLURMD_NODENAME), and prints one
JSON line tagged with its node. The step is stopped at the round's deadline or on close()
(Ctrl-C): srun is interrupted twice, as a person would, killed if it lingers, and any step of
ours still in `squeue -s` is cancelled, so no step is left behind.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from runbook.transports import INTERRUPTED, Node, ProbeAnswer
from runbook.transports.bundle import bundle_bytes
from runbook.transports.local import parse_answer

GATHER_S = 0.3  # quiet time after the last node asked before the round's step starts
GATHER_MAX_S = 2.0
STARTUP_S = 15.0  # srun's own start-up on top of the checks' timeout
STOP_WAIT_S = 3.0
# Runs on each node under srun: read the requests and the bundle, run the probe, answer once.
BOOTSTRAP = r"""
import base64, hashlib, json, os, subprocess, sys, tempfile
head, _, body = sys.stdin.buffer.read().partition(b"\n")
node = os.environ.get("SLURMD_NODENAME") or os.uname().nodename
request = json.loads(head)["requests"].get(node)
def answer(data):
    # srun merges the tasks' output in chunks of about 1 KB: short lines, each written whole.
    text = base64.b64encode(json.dumps(data).encode()).decode()
    parts = [text[i:i + 600] for i in range(0, len(text), 600)] or [""]
    for i, part in enumerate(parts):
        sys.stdout.write("RB1 %s %d %d %s\n" % (node, i, len(parts), part))
        sys.stdout.flush()
if request is None:
    answer({"node": node, "error": "no request for this node"})
    sys.exit(0)
pyz = base64.b64decode(body)
path = os.path.join(tempfile.gettempdir(), "runbook-probe-%s.pyz" % hashlib.sha256(pyz).hexdigest()[:16])
if not os.path.exists(path):
    tmp = "%s.%d" % (path, os.getpid())
    with open(tmp, "wb") as fh:
        fh.write(pyz)
    os.replace(tmp, path)
done = subprocess.run([sys.executable, path], input=json.dumps(request).encode(), capture_output=True)
answer({"node": node, "out": done.stdout.decode("utf-8", "replace"),
        "err": done.stderr.decode("utf-8", "replace")[-2000:], "rc": done.returncode})
"""


@dataclass
class _Round:
    """The requests of one step of one job, gathered from every node that asks."""

    job: str
    python: str
    requests: dict[str, dict[str, Any]] = field(default_factory=dict)
    answers: dict[str, ProbeAnswer] = field(default_factory=dict)
    last_ask: float = field(default_factory=time.monotonic)
    started: bool = False
    done: threading.Event = field(default_factory=threading.Event)


class SlurmTransport:
    def __init__(self, python: str | None = None, env: dict[str, str] | None = None,
                 gather_s: float = GATHER_S) -> None:
        self.python = python
        self.env = env
        self.gather_s = gather_s
        self.closed = False
        self._lock = threading.Lock()
        self._open: dict[tuple[str, str], _Round] = {}
        self._running: dict[subprocess.Popen[str], str] = {}  # srun -> its job id

    def run_check(self, node: Node, request: dict[str, Any], timeout: float) -> ProbeAnswer:
        job = str(node.vars.get("slurm_job") or "")
        if not job:
            return ProbeAnswer("error", error=f"{node.name}: no Slurm job to run in (--slurm-job)")
        start = time.monotonic()
        round_, leader = self._join(job, node, {**request, "timeout": timeout})
        if leader:
            self._lead(round_, timeout)
        round_.done.wait(timeout + STARTUP_S + STOP_WAIT_S + GATHER_MAX_S)
        answer = round_.answers.get(node.name) or ProbeAnswer(
            "unreachable", error=f"no answer from {node.name} in job {job}")
        answer.duration_s = answer.duration_s or time.monotonic() - start
        return answer

    def _join(self, job: str, node: Node, request: dict[str, Any]) -> tuple[_Round, bool]:
        key = (job, str(request.get("step")))
        python = str(node.vars.get("python") or self.python or "python3")
        with self._lock:
            round_ = self._open.get(key)
            leader = round_ is None or round_.started
            if leader:
                round_ = self._open[key] = _Round(job, python)
            assert round_ is not None
            round_.requests[node.name] = request
            round_.last_ask = time.monotonic()
        return round_, leader

    def _lead(self, round_: _Round, timeout: float) -> None:
        """Wait for the round's other nodes, then run its one step and hand out the answers."""
        begin = time.monotonic()
        while time.monotonic() - round_.last_ask < self.gather_s and time.monotonic() - begin < GATHER_MAX_S:
            time.sleep(0.02)
        with self._lock:
            round_.started = True
            self._open = {k: r for k, r in self._open.items() if r is not round_}
        try:
            round_.answers = self._step(round_, max(float(r.get("timeout") or timeout)
                                                    for r in round_.requests.values()))
        finally:
            round_.done.set()

    def _step(self, round_: _Round, timeout: float) -> dict[str, ProbeAnswer]:
        if self.closed:
            return {n: ProbeAnswer("error", error=INTERRUPTED) for n in round_.requests}
        name = f"runbook-probe-{uuid.uuid4().hex[:8]}"
        nodes = sorted(round_.requests)
        command = ["srun", "--jobid", round_.job, "--overlap", "--nodes", str(len(nodes)),
                   "--ntasks", str(len(nodes)), "--ntasks-per-node", "1", "--nodelist", ",".join(nodes),
                   "--input", "all", "--kill-on-bad-exit=0", "--job-name", name, "--quiet",
                   round_.python, "-c", BOOTSTRAP]
        stdin = json.dumps({"requests": round_.requests}) + "\n" + base64.b64encode(bundle_bytes()).decode()
        begin = time.monotonic()
        try:
            proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, start_new_session=True, env=self.env)
        except OSError as exc:
            return {n: ProbeAnswer("error", error=f"cannot run srun: {exc.strerror or exc}") for n in nodes}
        with self._lock:
            self._running[proc] = round_.job
        try:
            out, err = proc.communicate(stdin, timeout=timeout + STARTUP_S)
            timed_out = False
        except subprocess.TimeoutExpired:
            out, err = self._stop(proc, round_.job, name)
            timed_out = True
        finally:
            with self._lock:
                self._running.pop(proc, None)
        return self._answers(nodes, out, err, timed_out, timeout, time.monotonic() - begin)

    def _answers(self, nodes: list[str], out: str, err: str, timed_out: bool, timeout: float,
                 elapsed: float) -> dict[str, ProbeAnswer]:
        answers: dict[str, ProbeAnswer] = {}
        for tagged in _reassemble(out):
            node = str(tagged.get("node"))
            if "error" in tagged:
                answers[node] = ProbeAnswer("error", error=str(tagged["error"]), duration_s=elapsed)
            else:
                answers[node] = parse_answer(tagged.get("out", "").encode(),
                                             tagged.get("err", "").encode(), tagged.get("rc"), elapsed)
        why = (err.strip().splitlines() or ["srun gave no answer"])[-1][:300]
        for node in nodes:
            if node in answers:
                continue
            if self.closed:
                answers[node] = ProbeAnswer("error", error=INTERRUPTED, duration_s=elapsed)
            elif timed_out:
                reason = f"no answer within {timeout:g}s; the job step was cancelled"
                answers[node] = ProbeAnswer("ok", {"timed_out": True, "reason": reason}, duration_s=elapsed)
            else:
                answers[node] = ProbeAnswer("unreachable", error=f"srun: {why}", duration_s=elapsed)
        return answers

    def _stop(self, proc: subprocess.Popen[str], job: str, name: str | None = None) -> tuple[str, str]:
        """Interrupt srun twice (it then cancels the step), kill it if it lingers, and cancel
        any step of ours Slurm still lists."""
        for _ in range(2):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGINT)
            time.sleep(0.3)
        try:
            out, err = proc.communicate(timeout=STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        cancel_steps(job, name, self.env)
        return out or "", err or ""

    def close(self) -> None:
        """Stop every step still running (Ctrl-C): nothing is left in `squeue -s`."""
        with self._lock:
            self.closed = True
            running = dict(self._running)
        for proc, job in running.items():
            self._stop(proc, job)
        for job in set(running.values()):
            cancel_steps(job, None, self.env)


def _reassemble(out: str) -> list[dict[str, Any]]:
    """The tasks' answers from `RB1 NODE INDEX COUNT BASE64` lines, whatever their order."""
    parts: dict[str, dict[int, str]] = {}
    counts: dict[str, int] = {}
    for line in out.splitlines():
        words = line.split(" ")
        if len(words) != 5 or words[0] != "RB1" or not words[2].isdigit() or not words[3].isdigit():
            continue
        parts.setdefault(words[1], {})[int(words[2])] = words[4]
        counts[words[1]] = int(words[3])
    answers = []
    for node, pieces in parts.items():
        if len(pieces) != counts[node]:
            continue  # cut short (the step was stopped): no answer from this node
        with contextlib.suppress(ValueError):
            answers.append(json.loads(base64.b64decode("".join(pieces[i] for i in range(counts[node])))))
    return answers


def cancel_steps(job: str, name: str | None, env: dict[str, str] | None) -> None:
    """`scancel` the job's steps that runbook started (named runbook-probe-*)."""
    try:
        listed = subprocess.run(["squeue", "-h", "-s", "-j", job, "-o", "%i %j"], capture_output=True,
                                text=True, timeout=10, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return
    for line in listed.stdout.splitlines():
        step, _, step_name = line.strip().partition(" ")
        if step_name.startswith(name or "runbook-probe-"):
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                subprocess.run(["scancel", step], capture_output=True, timeout=10, env=env)
