"""The sections of a diagnosis bundle (seed 004's "生成诊断包"), each gathered by existing checks.

A node's sections run one after another through its transport (the SSH transport keeps one
probe per node and serves one request at a time); nodes run in parallel (see collect/bundle.py).
`process` runs first: it finds the training process whose pid, interpreter and command-line
config files the later sections use. Every section ends as a `SectionOutcome`: the file's body,
or why there is none. A timeout, a refusal, a missing tool are outcomes, never exceptions; only
an unreachable node stops the node's remaining sections.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from runbook.collect.archive import ABSENT, COLLECTED, DENIED, FAILED, TIMEOUT, UNREACHABLE
from runbook.collect.scripts import (
    CONDA_SCRIPT,
    CONFIG_CODE,
    DMESG_LINES,
    DMESG_SCRIPT,
    RAY_SCRIPT,
    TARGET_CODE,
    XID_LINES,
)
from runbook.run.redact import Redactor
from runbook.transports import Node

LOG_LINES = 500  # seed 004: "完整训练日志（最后 500 行）"
OUTPUT_CHARS = 4_000_000  # per command output kept (its end)
MIN_START_S = 0.5  # a section with less time left than this is not started
CONFIG_FILE_BYTES = 1_000_000
CONFIG_FILES_MAX = 50
# The training process's environment worth reading (secrets among them are redacted).
ENV_NAMES = ["NCCL_*", "TORCH_*", "TORCHELASTIC_*", "PYTORCH_*", "CUDA_*", "CUDNN_*", "NVIDIA_*",
             "MASTER_*", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
             "GROUP_WORLD_SIZE", "ROLE_RANK", "NODE_RANK", "OMP_*", "GLOO_*", "UCX_*", "FI_*",
             "RAY_*", "HF_*", "HUGGING_FACE_*", "TRANSFORMERS_*", "WANDB_*", "VLLM_*", "DS_*",
             "DEEPSPEED_*", "LD_LIBRARY_PATH", "LD_PRELOAD", "PATH", "PYTHONPATH", "PYTHONHOME",
             "VIRTUAL_ENV", "CONDA_*", "SLURM_*", "KUBERNETES_*"]


class NodeUnreachable(Exception):
    """The transport could not reach the node: its remaining sections are not tried."""


class CheckFailed(Exception):
    """The probe or the check failed on the node (one section's problem)."""


class OutOfTime(Exception):
    """The whole-run deadline leaves no time to start this section."""


@dataclass
class SectionOutcome:
    status: str
    body: str = ""
    reason: str | None = None
    source: str = ""
    duration_s: float = 0.0


@dataclass
class Target:
    """The training process the sections look at (found by the `process` section)."""

    pid: int | None = None
    python: str | None = None  # its interpreter, as the node names it
    configs: list[str] = field(default_factory=list)  # *.yaml|json|toml on its command line


@dataclass
class NodeJob:
    """One node's collection: how to ask it, its parameters, and what was found so far."""

    node: Node
    transport: Any  # NodeTransports or anything with run_check(node, request, timeout)
    params: dict[str, Any]  # log, config (list), pid, match
    deadline: float  # time.monotonic() of the whole run's end
    python: str | None = None  # --python / the node's `python` var: the training interpreter
    section_timeout: float | None = None
    target: Target = field(default_factory=Target)
    last_limit: float = 0.0  # the time the last check was given, for messages

    def ask(self, section: str, check: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Run one check on the node; its result, or an exception saying why there is none."""
        left = self.deadline - time.monotonic()
        if left < MIN_START_S:
            raise OutOfTime("not started: the whole-run --timeout ran out")
        limit = self.last_limit = min(self.section_timeout or timeout, left)
        request = {"check": check, "with": params, "step": f"collect:{section}"}
        answer = self.transport.run_check(self.node, request, limit)
        if answer.status == "unreachable":
            raise NodeUnreachable(answer.error or "unreachable")
        if answer.status != "ok":
            raise CheckFailed(f"{check} check failed: {answer.error}")
        return answer.result or {}

    def interpreter(self) -> str:
        """The training interpreter: given, else the training process's, else python3."""
        return self.python or self.target.python or "python3"


@dataclass(frozen=True)
class Section:
    name: str
    title: str
    timeout: float
    collect: Callable[[NodeJob, Section], SectionOutcome]

    @property
    def file(self) -> str:
        return f"{self.name}.txt"


# -- running -------------------------------------------------------------------------------------


def run_section(job: NodeJob, section: Section) -> SectionOutcome:
    """One section, with every failure but an unreachable node turned into its outcome."""
    start = time.monotonic()
    try:
        outcome = section.collect(job, section)
    except OutOfTime as exc:
        outcome = SectionOutcome(TIMEOUT, reason=str(exc))
    except CheckFailed as exc:
        outcome = SectionOutcome(FAILED, reason=str(exc))
    outcome.duration_s = time.monotonic() - start
    return outcome


def collect_node(job: NodeJob, sections: list[Section],
                 record: Callable[[Section, SectionOutcome], None]) -> None:
    """Every section of one node, in order; `record` gets each outcome as soon as it is known."""
    for index, section in enumerate(sections):
        try:
            record(section, run_section(job, section))
        except NodeUnreachable as exc:
            for rest in sections[index:]:
                record(rest, SectionOutcome(UNREACHABLE, reason=str(exc)))
            return


def render(node: str, section: Section, outcome: SectionOutcome) -> str:
    """The section's file: a short header (what, how, status, why) and the body."""
    lines = [f"# {section.title} on {node}", f"# status: {outcome.status}"]
    if outcome.source:
        lines.append(f"# source: {outcome.source}")
    if outcome.reason:
        label = "note" if outcome.status == COLLECTED else "not collected"
        lines.append(f"# {label}: {outcome.reason}")
    text = "\n".join(lines) + "\n"
    if outcome.body:
        text += "\n" + outcome.body.rstrip("\n") + "\n"
    return text


# -- helpers for command sections ----------------------------------------------------------------


def command(job: NodeJob, section: Section, script: str) -> dict[str, Any]:
    """Run a shell command through the `command` check, keeping the end of its output."""
    result = job.ask(section.name, "command", {"run": script, "max_chars": OUTPUT_CHARS},
                     section.timeout)
    if result.get("not_found"):
        raise CheckFailed(f"cannot start /bin/sh: {result.get('stderr', '').strip()[:200]}")
    return result


def timed_out(job: NodeJob, result: dict[str, Any], what: str) -> SectionOutcome | None:
    """A timeout outcome when the check hung, with whatever it printed before it was killed."""
    if not result.get("timed_out"):
        return None
    why = result.get("reason") or f"no answer within {job.last_limit:g}s; killed"
    return SectionOutcome(TIMEOUT, output(result), f"{what} did not finish: {why}")


def output(result: dict[str, Any]) -> str:
    """stdout, then stderr under its own heading when there is any."""
    text = str(result.get("stdout") or "")
    err = str(result.get("stderr") or "").strip()
    if err:
        text = text.rstrip("\n") + ("\n\n" if text.strip() else "") + "--- stderr ---\n" + err + "\n"
    return text


def gist(result: dict[str, Any]) -> str:
    """The line that says what happened: stderr's last (where a traceback ends), else stdout's first."""
    for stream in ("stderr", "stdout"):
        lines = [ln.strip() for ln in str(result.get(stream) or "").splitlines() if ln.strip()]
        if lines:
            return lines[-1][:300] if stream == "stderr" else lines[0][:300]
    return f"exit status {result.get('exit_code')}"


def _denied(text: str) -> bool:
    lowered = text.lower()
    return "permission denied" in lowered or "operation not permitted" in lowered


# Reads a command's result: (status, reason) when something is missing, else None.
Missing = Callable[[dict[str, Any]], tuple[str, str] | None]


def _command_outcome(job: NodeJob, result: dict[str, Any], source: str, missing: Missing) -> SectionOutcome:
    """The usual reading of a command: hung, missing, refused, failed, or its output."""
    hung = timed_out(job, result, source)
    if hung:
        hung.source = source
        return hung
    lacking = missing(result)
    if lacking:  # the tool's own last words say enough (ray prints a whole traceback)
        return SectionOutcome(lacking[0], gist(result) + "\n", lacking[1], source)
    if result.get("exit_code") != 0:
        status = DENIED if _denied(gist(result)) else FAILED
        return SectionOutcome(status, output(result), f"exit status {result.get('exit_code')}: "
                              f"{gist(result)}", source)
    return SectionOutcome(COLLECTED, output(result), None, source)


def _not_installed(name: str, hint: str) -> Missing:
    def missing(result: dict[str, Any]) -> tuple[str, str] | None:
        if result.get("exit_code") == 127:
            return ABSENT, f"{name} is not installed on this node ({hint})"
        return None
    return missing


# -- process ---------------------------------------------------------------------------------------



def collect_process(job: NodeJob, section: Section) -> SectionOutcome:
    pid, match, log = job.params.get("pid"), job.params.get("match"), job.params.get("log")
    chosen = {"pid": pid} if pid else {"match": match} if match else {}
    source = "process check" + (f" ({next(iter(chosen))}={next(iter(chosen.values()))})" if chosen
                                else " (auto: Python with RANK/WORLD_SIZE or libtorch)")
    if log and not pid:
        # The job's own process first: the one writing its log, not any Python with RANK set
        # (another job on the node has one too).
        chosen["log"] = log
        source += f", tied to the writer of {log}"
    result = job.ask(section.name, "process", chosen, 5.0)
    hung = timed_out(job, result, "the process check")
    if hung:
        return hung
    if not result.get("found"):
        # Asked for a pid or a pattern that is not there: a failure; nothing found by itself (or no
        # writer of the log: the job has exited) is a finding.
        return SectionOutcome(FAILED if pid or match else ABSENT, _process_table(result),
                              result.get("reason") or "no process", source)
    job.target.pid = int(pid) if pid else int(result["pid"])
    body = _process_table(result) + "\n" + _target_details(job, section)
    return SectionOutcome(COLLECTED, body, None, source + " + python check (command line, cwd)")


def _process_table(result: dict[str, Any]) -> str:
    rows = ["pid     ppid    state  cpu%    rss_mib  threads  age_s     rank  local_rank  world_size  "
            "cmdline"]
    for p in result.get("processes") or []:
        rows.append(f"{p['pid']:<7} {p['ppid']:<7} {p['state']:<6} {p['cpu_percent']:<7} "
                    f"{p['rss_mib']:<8} {p['threads']:<8} {p['age_s']:<9} {_dash(p['rank']):<5} "
                    f"{_dash(p['local_rank']):<11} {_dash(p['world_size']):<11} {p['cmdline']}")
    if result.get("unreadable"):
        rows.append(f"({result['unreadable']} processes could not be read: permission denied)")
    return "\n".join(rows) + "\n"


def _dash(value: Any) -> str:
    return "-" if value is None else str(value)


def _target_details(job: NodeJob, section: Section) -> str:
    """The target's command line, cwd and interpreter; notes why when they cannot be read."""
    try:
        answer = job.ask(section.name, "python", {"code": TARGET_CODE, "pid": job.target.pid}, 10.0)
    except CheckFailed as exc:
        return f"training process details: not read ({exc})\n"
    if not answer.get("ok"):
        return f"training process details: not read ({answer.get('error') or answer.get('reason')})\n"
    value = answer.get("value") or {}
    job.target.python = value.get("python") or None
    job.target.configs = [str(c) for c in value.get("configs") or []]
    lines = [f"training process: pid {job.target.pid}",
             f"command line: {shlex.join(str(a) for a in value.get('argv') or [])}",
             f"working directory: {value.get('cwd') or '?'}",
             f"executable: {value.get('exe') or '?'}",
             f"interpreter: {value.get('python') or '(not a Python process)'}",
             f"interpreter for pip/conda/collect_env: {job.interpreter()}"
             + (" (given with --python or the node's `python`)" if job.python else ""),
             f"config files on its command line: {', '.join(job.target.configs) or 'none'}"]
    return "\n".join(lines) + "\n"


# -- env, stack ------------------------------------------------------------------------------------

_NO_PROCESS = "no training process found (give --set pid=PID or --set match=REGEX)"


def collect_env(job: NodeJob, section: Section) -> SectionOutcome:
    if job.target.pid is None:
        return SectionOutcome(ABSENT, reason=_NO_PROCESS, source="env check")
    source = f"env check: /proc/{job.target.pid}/environ"
    result = job.ask(section.name, "env", {"pid": job.target.pid, "names": ENV_NAMES}, 5.0)
    hung = timed_out(job, result, "the env check")
    if hung:
        return hung
    if not result.get("readable"):
        reason = str(result.get("reason"))
        return SectionOutcome(DENIED if _denied(reason) else FAILED, reason=reason, source=source)
    redactor = Redactor()
    variables = result.get("vars") or {}
    body = "".join(f"{name}={redactor.env(name, str(value))}\n" for name, value in sorted(variables.items()))
    body = (body or "(none of these variables is set)\n") + f"\n(names read: {' '.join(ENV_NAMES)})\n"
    return SectionOutcome(COLLECTED, body, None, source)


def collect_stack(job: NodeJob, section: Section) -> SectionOutcome:
    pid, match = job.params.get("pid"), job.params.get("match")
    if job.target.pid is None:
        return SectionOutcome(ABSENT, reason=_NO_PROCESS, source="stack check (py-spy dump)")
    chosen = {"pid": pid} if pid else {"match": match} if match else {}
    result = job.ask(section.name, "stack", chosen, section.timeout)
    source = f"stack check: {result.get('py_spy') or 'py-spy'} dump of every training process"
    hung = timed_out(job, result, "the stack check")
    if hung:
        return hung
    if not result.get("py_spy") or not result.get("found"):  # py-spy not installed, or no process
        return SectionOutcome(ABSENT, reason=result.get("reason") or "no process", source=source)
    processes = result.get("processes") or []
    if any(p.get("threads") for p in processes):
        status = COLLECTED  # the reason, if any, says which processes could not be dumped
    else:
        status = DENIED if result.get("permission_denied") else FAILED
    return SectionOutcome(status, _stacks_text(result), result.get("reason"), source)


def _stacks_text(result: dict[str, Any]) -> str:
    lines = [f"ranks wait in different collectives: {'yes' if result.get('mismatched') else 'no'}"
             + (f" (odd ranks: {result['odd_ranks']})" if result.get("odd_ranks") else ""), ""]
    for proc in result.get("processes") or []:
        lines.append(f"== pid {proc['pid']} (ppid {proc['ppid']}, rank {_dash(proc.get('rank'))}, "
                     f"{proc.get('role')}): {proc.get('cmdline')}")
        if proc.get("error"):
            lines.append(f"   not dumped: {proc['error']}")
        if proc.get("main_wait"):
            lines.append(f"   main thread waits: {proc['main_wait']}"
                         + (f" in {proc['main_op']}" if proc.get("main_op") else "")
                         + (f" at {proc['main_user_frame']}" if proc.get("main_user_frame") else ""))
        for thread in proc.get("threads") or []:
            lines.append(f"   Thread {thread.get('thread_id')} \"{thread.get('name')}\" "
                         f"[{thread.get('waits')}{' ' + str(thread['op']) if thread.get('op') else ''}]")
            lines += [f"       {frame}" for frame in thread.get("frames") or []]
        lines.append("")
    return "\n".join(lines)


# -- log -----------------------------------------------------------------------------------------


def collect_log(job: NodeJob, section: Section) -> SectionOutcome:
    path = str(job.params.get("log") or "").strip()
    if not path:
        return SectionOutcome(ABSENT, reason="no log given (--set log=PATH; a glob picks the newest file)",
                              source="log check")
    result = job.ask(section.name, "log", {"path": path, "tail": 0}, 10.0)
    hung = timed_out(job, result, "the log check")
    if hung:
        return hung
    if not result.get("exists"):
        reason = str(result.get("reason"))
        return SectionOutcome(DENIED if _denied(reason) else FAILED, reason=reason, source="log check")
    chosen = str(result["path"])
    source = f"log check (newest match of {path}) + command `tail -n {LOG_LINES} {chosen}`"
    tail = command(job, section, f"tail -n {LOG_LINES} -- {shlex.quote(chosen)}")
    hung = timed_out(job, tail, "tail")
    if hung:
        return hung
    if tail.get("exit_code") != 0:
        return SectionOutcome(DENIED if _denied(gist(tail)) else FAILED,
                              reason=gist(tail), source=source)
    return SectionOutcome(COLLECTED, _log_summary(result) + "\n" + str(tail.get("stdout") or ""), None,
                          source)


def _log_summary(result: dict[str, Any]) -> str:
    signatures = [f"{name} x{info['count']}" for name, info in (result.get("signatures") or {}).items()
                  if info.get("count")]
    others = [f["path"] for f in (result.get("files") or [])[1:]]
    lines = [f"file: {result['path']} ({result.get('size_bytes')} bytes, last written "
             f"{result.get('age_s')} s before collection)",
             f"known error signatures: {', '.join(signatures) or 'none'}"
             + (f"; first: {result['first_signature']}" if result.get("first_signature") else ""),
             f"other files matching: {', '.join(others[:20]) or 'none'}"
             + (f" (+{len(others) - 20} more)" if len(others) > 20 else ""),
             f"--- last {LOG_LINES} lines ---"]
    return "\n".join(lines)


# -- nvidia-smi, dmesg ---------------------------------------------------------------------------


def collect_nvidia_smi(job: NodeJob, section: Section) -> SectionOutcome:
    result = command(job, section, "nvidia-smi -q")
    outcome = _command_outcome(job, result, "command `nvidia-smi -q`",
                               _not_installed("nvidia-smi", "no NVIDIA driver, or not on PATH"))
    if outcome.status == TIMEOUT:
        outcome.reason = (f"nvidia-smi -q did not answer within {job.last_limit:g}s and was killed: "
                          "a hanging nvidia-smi usually means a stuck GPU driver (itself a finding)")
    return outcome




def collect_dmesg(job: NodeJob, section: Section) -> SectionOutcome:
    result = command(job, section, DMESG_SCRIPT)
    hung = timed_out(job, result, "dmesg")
    if hung:
        return hung
    parts = _marked(str(result.get("stdout") or ""))
    refusals = [_refusal(line) for line in parts.get("refused", [])]
    if "source" not in parts:
        reason = "; ".join(refusals) or gist(result)
        return SectionOutcome(DENIED if _denied(reason) else FAILED, reason=reason,
                              source="command `dmesg -T`, else `journalctl -k`")
    source = f"command `{parts['source'][0]}`"
    xid, tail = parts.get("xid", []), parts.get("tail", [])
    body = (f"--- Xid lines ({len(xid)}, at most the last {XID_LINES}) ---\n" + "".join(f"{x}\n" for x in xid)
            + f"\n--- last {DMESG_LINES} lines ---\n" + "".join(f"{t}\n" for t in tail))
    return SectionOutcome(COLLECTED, body, "; ".join(refusals) or None, source)


def _refusal(line: str) -> str:
    """`dmesg 1 dmesg: read kernel buffer failed: ...` -> `dmesg (exit 1): dmesg: read ...`."""
    name, rc, message = (line.split(" ", 2) + ["", ""])[:3]
    return f"{name}: not installed" if rc == "127" else f"{name} (exit {rc}): {message}"


def _marked(stdout: str) -> dict[str, list[str]]:
    """The script's output split at its @@ marker lines: refused, source, xid, tail."""
    parts: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in stdout.splitlines():
        if line.startswith("@@refused "):
            parts.setdefault("refused", []).append(line[len("@@refused "):])
        elif line.startswith("@@source "):
            parts["source"] = [line[len("@@source "):]]
        elif line in ("@@xid", "@@tail"):
            current = parts.setdefault(line[2:], [])
        elif current is not None and line:
            current.append(line)
    return parts


# -- config files ----------------------------------------------------------------------------------



def collect_config(job: NodeJob, section: Section) -> SectionOutcome:
    patterns = [str(p) for p in job.params.get("config") or []]
    if not patterns and not job.target.configs:
        return SectionOutcome(ABSENT, reason="no config given (--set config=GLOB) and none named on the "
                              "training command line", source="python check")
    spec = {"patterns": patterns, "named": job.target.configs, "max_bytes": CONFIG_FILE_BYTES,
            "max_files": CONFIG_FILES_MAX}
    code = CONFIG_CODE.replace("__SPEC__", repr(json.dumps(spec)))
    source = "python check: reads the files of --set config and those on the training command line"
    answer = job.ask(section.name, "python", {"code": code}, section.timeout)
    hung = timed_out(job, answer, "reading the config files")
    if hung:
        return hung
    if not answer.get("ok"):
        return SectionOutcome(FAILED, reason=str(answer.get("error") or answer.get("reason")), source=source)
    value = answer.get("value") or {}
    problems = [f"no file matches {p}" for p in value.get("unmatched") or []]
    problems += [f"{f['path']}: {f['error']}" for f in value.get("files") or [] if f.get("error")]
    status = FAILED if value.get("unmatched") else COLLECTED
    return SectionOutcome(status, _config_text(value), "; ".join(problems) or None, source)


def _config_text(value: dict[str, Any]) -> str:
    out = []
    for entry in value.get("files") or []:
        note = f"{entry.get('size')} bytes, from the {entry['origin']}" + \
            (f", first {CONFIG_FILE_BYTES} bytes" if entry.get("truncated") else "")
        out.append(f"===== {entry['path']} ({note}) =====\n")
        out.append(f"({entry['error']})\n\n" if entry.get("error") else
                   str(entry.get("text") or "").rstrip("\n") + "\n\n")
    return "".join(out)


# -- the training interpreter: pip, conda, torch, ray ----------------------------------------------


def _no_python(py: str) -> Missing:
    """A missing interpreter is a failure (the node's setup, or a wrong --python)."""
    def missing(result: dict[str, Any]) -> tuple[str, str] | None:
        if result.get("exit_code") == 127:
            return FAILED, f"interpreter {py} not found on the node (give --python PATH)"
        return None
    return missing


def _no_module(py: str, module: str) -> Missing:
    """...and a module missing from it is absent: there is nothing of it to list."""
    def missing(result: dict[str, Any]) -> tuple[str, str] | None:
        text = f"{result.get('stdout')}\n{result.get('stderr')}"
        if re.search(rf"No module named '?{re.escape(module)}\b", text):
            return ABSENT, f"{module} is not installed in {py}"
        return _no_python(py)(result)
    return missing


def collect_pip(job: NodeJob, section: Section) -> SectionOutcome:
    py = job.interpreter()
    script = f"{shlex.quote(py)} -m pip list"
    return _command_outcome(job, command(job, section, script), f"command `{script}`", _no_module(py, "pip"))


def collect_torch_env(job: NodeJob, section: Section) -> SectionOutcome:
    py = job.interpreter()
    script = f"{shlex.quote(py)} -m torch.utils.collect_env"
    return _command_outcome(job, command(job, section, script), f"command `{script}`",
                            _no_module(py, "torch"))




def collect_conda(job: NodeJob, section: Section) -> SectionOutcome:
    py = job.interpreter()
    result = command(job, section, CONDA_SCRIPT.replace("__PY__", shlex.quote(py)))
    source = f"command `conda list -p PREFIX` for the environment of {py}"
    stdout = str(result.get("stdout") or "")
    head, _, rest = stdout.partition("\n")
    if head.startswith("@@not-conda "):
        return SectionOutcome(ABSENT, reason=f"{py} is not in a conda environment "
                              f"(its prefix {head[len('@@not-conda '):]} has no conda-meta)", source=source)
    if head.startswith("@@conda-meta "):
        source = f"listing {head[len('@@conda-meta '):]} (no conda command found)"
    elif head.startswith("@@conda "):
        source = f"command `{head[len('@@conda '):]}`"
    if head.startswith("@@"):
        result = {**result, "stdout": rest}
    return _command_outcome(job, result, source, _no_python(py))




def collect_ray(job: NodeJob, section: Section) -> SectionOutcome:
    py = job.interpreter()
    result = command(job, section, RAY_SCRIPT.replace("__PY__", shlex.quote(py)))
    stdout = str(result.get("stdout") or "")
    head, _, rest = stdout.partition("\n")
    if head == "@@not-installed":
        return SectionOutcome(ABSENT, reason=f"ray is not installed (not next to {py}, not on PATH)",
                              source="command `ray status`")
    ray = head[len("@@ray "):] if head.startswith("@@ray ") else "ray"
    source = f"command `{ray} status`"
    result = {**result, "stdout": rest if head.startswith("@@") else stdout}
    return _command_outcome(job, result, source, _ray_not_running)


def _ray_not_running(result: dict[str, Any]) -> tuple[str, str] | None:
    text = f"{result.get('stdout')}\n{result.get('stderr')}"
    if "Could not find any running Ray instance" in text:
        return ABSENT, "Ray is not running on this node (ray status: could not find any running Ray instance)"
    return None


# -- the table -------------------------------------------------------------------------------------

# In the order they run: what describes the hang right now (process, environment, stacks) first,
# the slow inventories (pip, conda, collect_env) last, so a short --timeout loses the least.
SECTIONS: list[Section] = [
    Section("process", "Training processes", 15.0, collect_process),
    Section("env", "Environment of the training process", 5.0, collect_env),
    Section("stack", "Python stacks (py-spy)", 30.0, collect_stack),
    Section("log", f"Training log (last {LOG_LINES} lines)", 10.0, collect_log),
    Section("nvidia-smi", "nvidia-smi -q", 20.0, collect_nvidia_smi),
    Section("dmesg", "Kernel log (Xid lines and tail)", 15.0, collect_dmesg),
    Section("config", "Job config files", 10.0, collect_config),
    Section("ray-status", "ray status", 30.0, collect_ray),
    Section("pip-list", "pip list of the training interpreter", 60.0, collect_pip),
    Section("conda-list", "conda list of the training interpreter's environment", 60.0, collect_conda),
    Section("collect_env", "python -m torch.utils.collect_env", 90.0, collect_torch_env),
]
