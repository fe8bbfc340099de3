"""Numbers as evidence: the metric lines of a log read as series, per rank or host.

A pasted table of loss, learning-rate or step-time values has no error line, yet an engineer
reads a cause in it: a loss that turns NaN or climbs, a learning rate that never moves although
a schedule was set, every k-th step taking several times the others (the data loader), one
rank slower than the rest. Each reading names its conclusion and carries the numbers.

The rules are data (METRICS, RULES, TEXTS): the site's triage page applies the same ones
(site/static/triage.js, exported by site/triage_export.py). A large log is read at its head
and its tail only (HEAD_BLOCKS, TAIL_BLOCKS per file): that is where a trend shows, and it keeps
the scan of a gigabyte of step lines as cheap as before.
"""

from __future__ import annotations

import math
import re
from collections import Counter, deque
from dataclasses import dataclass, field
from statistics import median
from typing import Any

from runbook.triage.readings import logends, shown, spread, stacks, topology
from runbook.triage.readings.spread import who_wrote
from runbook.triage.sources import Source, line_rank

# A printed value: 2.31, 1,234, 7.1E+00, .5, and for loss and grad norm nan / inf.
_VALUE = (r"([-+]?[0-9][0-9,]*(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?|[-+]?\.[0-9]+(?:[eE][-+]?[0-9]+)?"
          r"|[-+]?(?:nan|NaN|NAN|inf|Inf|INF)\b)")
_RATE = r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"
_SECONDS = r"([0-9]+(?:\.[0-9]+)?)"
_COUNT = r"([0-9][0-9,]*(?:\.[0-9]+)?)"
_STEP_TIME = r"\b(?:[Ss]tep|[Ii]ter(?:ation)?|[Bb]atch)[ _-]?[Tt]ime"
# metric: the series a value joins; pattern: the value is group 1; needle: lowercase text a line
# holds before the pattern runs; scale: the value in the metric's unit (step_time in seconds);
# invert: the value is a rate (it/s), its inverse is the step time. The first spec of a metric
# that matches a line gives its value.
METRICS: list[dict[str, Any]] = [
    {"metric": "loss", "needle": "loss",
     "pattern": r"(?:^|[^A-Za-z0-9_/])(?:lm[ _]|train[/_ ])?(?:loss|Loss|LOSS)(?:_step|_epoch)?['\"]?"
                r"(?:\s*[:=]\s*|\s+)\[?" + _VALUE},
    {"metric": "grad_norm", "needle": "norm",
     "pattern": r"(?:[Gg]rad(?:ient)?[_ ]?[Nn]orm|GRAD[_ ]?NORM)['\"]?(?:\s*[:=]\s*|\s+)" + _VALUE},
    {"metric": "lr", "needle": "lr",
     "pattern": r"(?:^|[^A-Za-z0-9])(?:lr|LR)['\"]?(?:\s*[:=]\s*|\s+)\[?" + _RATE},
    {"metric": "lr", "needle": "learning",
     "pattern": r"(?:^|[^A-Za-z0-9])(?:learning_rate|learning rate)['\"]?(?:\s*[:=]\s*|\s+)\[?" + _RATE},
    {"metric": "step_time", "needle": "elapsed time per iteration", "scale": 0.001,
     "pattern": r"elapsed time per iteration \(ms\):\s*" + _SECONDS},
    {"metric": "step_time", "needle": "step_timing",
     "pattern": r"train_step_timing(?: in s)?\s*[=:]\s*" + _SECONDS},
    {"metric": "step_time", "needle": "timing_s/step",
     "pattern": r"timing_s/step\s*[:=]\s*" + _SECONDS},
    {"metric": "step_time", "needle": "time", "scale": 0.001,
     "pattern": _STEP_TIME + r"(?:\s*\(ms\)|_ms)\s*[:=]?\s*" + _SECONDS},
    {"metric": "step_time", "needle": "time",
     "pattern": _STEP_TIME + r"(?:\s*\(s\)|_s)?\s*[:=]\s*" + _SECONDS + r"s?\b"},
    # `Time/step: 44.22` (CLIP4Clip and other loggers that print the time per step or per batch)
    {"metric": "step_time", "needle": "time/",
     "pattern": r"\b[Tt]ime/(?:step|iter|it|batch)\s*[:=]\s*" + _SECONDS + r"s?\b"},
    {"metric": "step_time", "needle": "s/it",
     "pattern": _SECONDS + r"\s?s/it\b"},
    {"metric": "step_time", "needle": "it/s", "invert": True,
     "pattern": _SECONDS + r"\s?it/s\b"},
    {"metric": "throughput", "needle": "tps",
     "pattern": r"\btps['\"]?\s*[:=]\s*" + _COUNT},
    {"metric": "throughput", "needle": "/s",
     "pattern": r"\b(?:[Tt]okens?|[Ss]amples?|tok)/s(?:ec)?['\"]?\s*[:=]\s*" + _COUNT},
    {"metric": "throughput", "needle": "per",
     "pattern": r"\b(?:tokens_per_second|samples_per_second|SamplesPerSec)['\"]?\s*[:=]\s*" + _COUNT},
    # fp16's dynamic loss scale: DeepSpeed's `Attempted loss scale: 64, reducing to 32`, Megatron's
    # `loss scale: 1.0`, fairseq's `loss_scale 0.5` and `setting loss scale to: 0.25`
    {"metric": "loss_scale", "needle": "reducing to", "pattern": r"reducing to\s*" + _RATE},
    {"metric": "loss_scale", "needle": "scale",
     "pattern": r"[Ll]oss[ _][Ss]cale(?: to)?['\"]?(?:\s*[:=]\s*|\s+)" + _RATE},
    # vLLM's scheduler stats: `Running: 0 reqs, Swapped: 0 reqs, Pending: 1 reqs, GPU KV cache usage:
    # 0.0%` (V0; V1 says `Waiting:`)
    {"metric": "kv_usage", "needle": "kv cache usage", "pattern": r"GPU KV cache usage:\s*" + _RATE + "%"},
    {"metric": "running", "needle": "reqs", "pattern": r"\bRunning:\s*" + _COUNT + r" reqs"},
    {"metric": "waiting", "needle": "reqs", "pattern": r"\b(?:Pending|Waiting):\s*" + _COUNT + r" reqs"},
    # a process's resident memory, in GiB: `RSS MEM USE: 46.51G`, `RSS: 54.73GB`, `cpu_mem=12 GiB`
    {"metric": "host_rss", "needle": "rss", "units": True,
     "pattern": r"\b(?:RSS(?: MEM USE)?|rss|host_mem|cpu_mem)\s*[:=]\s*" + _RATE + r"\s*([KMGT])(?:i?B)?\b"},
]
# a value with a unit (a spec with "units": group 2) in GiB
UNITS = {"K": 1 / 1024 ** 2, "M": 1 / 1024, "G": 1.0, "T": 1024.0}
# A line that sets a schedule: a learning rate that never moves then means none is applied.
SCHEDULE = r"[Ww]arm_?up|WARMUP|lr_?sched|[Ss]cheduler|cosine|decay_style|lr_decay"
RULES: dict[str, float] = {
    "min_points": 5,  # values of one series before a trend or a median is read
    "climb_ratio": 1.5,  # last quarter's mean against the first quarter's: the loss climbs
    "climb_over_min": 2.0,  # ... and against its lowest value
    "lr_min_points": 8,  # learning rates printed before "it never moves" is said
    "spike_warmup": 2,  # first step times left out: compilation, caches and the first batch
    "spike_min_points": 8,  # step times after the warm-up before periodic spikes are looked for
    # a spike: at least this many times the lower quartile of the steps (the fast steps' time even
    # when every other step is slow, as with too few loader workers)
    "spike_ratio": 2.5,
    "spike_min": 3,  # spikes needed
    "spike_max_share": 0.5,  # more spikes than this share is not a spike pattern (every 2nd: half)
    "spike_regular_share": 0.6,  # of the gaps between spikes, this share has the same length
    "slow_min_points": 3,  # values per rank before ranks are compared
    "slow_ratio": 1.25,  # the slowest rank's median step time against the others' median
    "steady_rise": 0.02,  # a loss whose last quarter is at most this much above its first ...
    "steady_over_min": 1.2,  # ... or at most this many times its lowest is not climbing
    # fp16 overflows on every step: the dynamic loss scale fell this many times, to this or less
    # (healthy fp16 runs settle at 2^10..2^16; below 2^7 even tiny scales overflow)
    "scale_drops": 3,
    "scale_low": 128,
    # ... or, from no more than the usual start (2^16, DeepSpeed's and Apex's default), it kept falling:
    # this many drops (64x) is overflow after overflow, not the first steps' calibration. A run that
    # starts at 2^32 calibrates through many drops and is left to the rule above.
    "scale_run_drops": 6,
    "scale_run_start": 65536,
    # ... otherwise a scale that fell at least this many times and is still at least this high is the
    # first steps' calibration (DeepSpeed's `OVERFLOW! ... reducing to`): it settles, nothing overflows
    "scale_settle_drops": 2,
    "scale_settled": 1024,
    # host memory grows: the last quarter's mean at least this many times the first quarter's,
    # and at least this many GiB more
    "rss_ratio": 1.5,
    "rss_growth_gib": 2.0,
    # the loss jumps: one value at least this many times the one before (from at least jump_from)
    # and none after it back under half the jump: a broken update, not noise
    "jump_ratio": 3.0,
    "jump_from": 0.5,
    # the learning rate is 0 for at least this many values, then one other value to the end
    "lr_zero_run": 2,
    # vLLM: the GPU KV cache was this full, and the last stats lines show requests waiting with
    # none running: a request that does not fit in the cache waits forever
    "kv_full_pct": 99.0,
    "kv_stuck_lines": 3,
}
CONCLUSIONS = {
    "loss-nonfinite": "nan-loss:loss-diverged", "loss-nonfinite-from-start": "nan-loss:loss-diverged",
    "loss-climbs": "nan-loss:loss-diverged", "loss-jumps": "nan-loss:loss-diverged",
    "lr-zero": "nan-loss:lr-not-scheduled", "lr-constant": "nan-loss:lr-not-scheduled",
    "lr-zero-then-constant": "nan-loss:lr-not-scheduled", "kv-cache-stuck": "cuda-oom:kv-cache-too-small",
    "step-spikes": "slow-training:input-bound", "slow-rank": "slow-training:straggler-node",
    "loss-scale-collapses": "nan-loss:fp16-overflow", "host-memory-grows": "memory-growth:host-memory-growth",
    "loss-steady": "training-hang:healthy", "loss-scale-settles": "nan-loss:loss-finite",
}
# readings that say the numbers look well, said only when nothing else is
HEALTHY = ("loss-steady", "loss-scale-settles")
ORDER = ["loss-nonfinite", "loss-nonfinite-from-start", "loss-jumps", "loss-climbs", "loss-scale-collapses",
         "lr-zero", "lr-zero-then-constant", "lr-constant", "kv-cache-stuck", "host-memory-grows",
         "step-spikes", "slow-rank", "loss-steady", "loss-scale-settles"]
TEXTS: dict[str, dict[str, str]] = {
    "loss-nonfinite": {
        "en": "the loss{who} turns {value} at {at} after {finite} finite values (last finite: {last})",
        "zh": "损失{who}在 {at} 变成 {value}，此前有 {finite} 个有限值（最后一个有限值：{last}）"},
    "loss-nonfinite-from-start": {
        "en": "the loss{who} is {value} from the first value printed ({at})",
        "zh": "损失{who}从打印出的第一个值起就是 {value}（{at}）"},
    "loss-climbs": {
        "en": "the loss{who} climbs: from {start} to {end} over {count} values (lowest {low})",
        "zh": "损失{who}在上升：{count} 个值中从 {start} 升到 {end}（最低 {low}）"},
    "loss-jumps": {
        "en": "the loss{who} jumps from {before} to {after} at {at} ({ratio}× in one step) and stays up",
        "zh": "损失{who}在 {at} 从 {before} 跳到 {after}（一步之内 {ratio} 倍），此后没有回落"},
    "lr-zero-then-constant": {
        "en": "the learning rate{who} is 0 in the first {zeros} values, then {value} in all {count} after "
              "them: no warm-up ramp and no decay, not the schedule a run asks for",
        "zh": "学习率{who}在前 {zeros} 个值中为 0，之后的全部 {count} 个值都是 {value}："
              "既没有预热爬升也没有衰减，不是训练所要求的调度"},
    "kv-cache-stuck": {
        "en": "the GPU KV cache was {peak}% full ({at}); in the last {count} stats lines {waiting} "
              "request(s) wait and none runs: a request that does not fit in the KV cache waits forever",
        "zh": "GPU KV cache 曾占满 {peak}%（{at}）；最后 {count} 行统计中有 {waiting} 个请求在等待、"
              "没有请求在运行：放不进 KV cache 的请求会一直等下去"},
    "lr-zero": {
        "en": "the learning rate{who} is 0 in all {count} values printed: nothing is learnt",
        "zh": "学习率{who}在打印出的全部 {count} 个值中都是 0：模型没有在学习"},
    "lr-constant": {
        "en": "the learning rate{who} stays {value} in all {count} values although the log sets a "
              "schedule ({schedule})",
        "zh": "日志设置了调度（{schedule}），但学习率{who}在全部 {count} 个值中都是 {value}"},
    "step-spikes": {
        "en": "one step in every {every}{who} takes {spike} s against a median of {median} s for the "
              "others ({count} of {points} steps): the input pipeline does not keep up",
        "zh": "每隔 {every} 步{who}有一步耗时 {spike} 秒，其余步的中位数为 {median} 秒"
              "（{points} 步中 {count} 步）：数据管道跟不上"},
    "slow-rank": {
        "en": "{slow} is slower than the others: its {metric} is {value} against {others} on the "
              "other {peers} ({ratio}×)",
        "zh": "{slow} 比其他 rank 慢：它的{metric}为 {value}，其余 {peers} 个为 {others}（{ratio} 倍）"},
    "loss-scale-collapses": {
        "en": "the fp16 loss scale{who} fell {drops} times, from {start} to {end}: the gradients "
              "overflow step after step",
        "zh": "fp16 的损失缩放因子{who}下降了 {drops} 次，从 {start} 降到 {end}：梯度一步接一步地溢出"},
    "host-memory-grows": {
        "en": "the resident memory{who} grows from {start} GiB to {end} GiB over {count} values",
        "zh": "常驻内存{who}在 {count} 个值中从 {start} GiB 增长到 {end} GiB"},
    "loss-steady": {
        "en": "the loss{who} is finite and not climbing: {start} → {end} over {count} values",
        "zh": "损失{who}是有限值且没有上升：{count} 个值中 {start} → {end}"},
    "loss-scale-settles": {
        "en": "the fp16 loss scale{who} fell {drops} times, from {start} to {end}, and is still high: the "
              "first steps' calibration of the dynamic loss scale, not gradients that keep overflowing",
        "zh": "fp16 损失缩放{who}下降了 {drops} 次，从 {start} 到 {end}，仍然很高："
              "这是动态损失缩放在最初几步的校准，而不是梯度持续溢出"},
}
METRIC_NAMES = {"step_time": {"en": "median step time (s)", "zh": "中位单步耗时（秒）"},
                "throughput": {"en": "median throughput", "zh": "中位吞吐"}}
HEAD_BLOCKS = 2  # blocks of each file read at its start ...
TAIL_BLOCKS = 2  # ... and at its end
KEPT = 4096  # values kept per series (the first ones and the last ones)

SPECS = [(spec, re.compile(spec["pattern"])) for spec in METRICS]
NEEDLES = tuple(sorted({spec["needle"] for spec in METRICS}))
SCHEDULE_RE = re.compile(SCHEDULE)


def may_hold_metrics(lowered: str) -> bool:
    """Whether lowercased text may hold a metric line (before each block and each line)."""
    return any(needle in lowered for needle in NEEDLES)


def number(text: str) -> float | None:
    """A printed value as a float: `1,234.5` is 1234.5; `nan` and `inf` are themselves."""
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


@dataclass
class Point:
    value: float
    where: str  # file:line


@dataclass
class _Block:
    source: Source
    numbers: list[int]
    raws: list[str]
    lines: list[str]


@dataclass
class Series:
    """Every metric's values per writer, and whether the log sets a learning-rate schedule."""

    values: dict[tuple[str, str], list[Point]] = field(default_factory=dict)  # (metric, who)
    schedule: str = ""  # the first line that sets one, as written
    sources: int = 0
    _source: Source | None = None
    _blocks_seen: int = 0
    _tail: deque[_Block] = field(default_factory=lambda: deque(maxlen=TAIL_BLOCKS))

    def start(self, source: Source) -> None:
        self.finish()
        self._source, self._blocks_seen = source, 0

    def block(self, numbers: list[int], raws: list[str], lines: list[str], lowered: str) -> None:
        """One block of the current file; its head is read now, its tail when the file ends."""
        if self._source is None or not may_hold_metrics(lowered):
            self._blocks_seen += 1
            return
        if self._blocks_seen < HEAD_BLOCKS:
            self._read(_Block(self._source, numbers, raws, lines))
        else:
            self._tail.append(_Block(self._source, numbers, raws, lines))
        self._blocks_seen += 1

    def finish(self) -> None:
        """Read the tail of the file that was being fed."""
        while self._tail:
            self._read(self._tail.popleft())

    def see(self, raw: str, text: str, source: Source, line_no: int) -> None:
        """Read one line: `raw` as written (its prefix names the rank), `text` normalised."""
        lowered = text.lower()
        if not self.schedule and SCHEDULE_RE.search(text):
            self.schedule = text.strip()[:120]
        if not may_hold_metrics(lowered):
            return
        who: str | None = None
        taken: set[str] = set()
        for spec, regex in SPECS:
            if spec["metric"] in taken or spec["needle"] not in lowered:
                continue
            found = regex.search(text)
            value = number(found.group(1)) if found else None
            if value is None:
                continue
            taken.add(spec["metric"])
            if spec.get("invert"):
                if value <= 0:
                    continue
                value = 1.0 / value
            value *= spec.get("scale", 1.0)
            if spec.get("units"):
                value *= UNITS[found.group(2)]
            if who is None:
                who = rank_or_host(raw, source, self.sources > 1)
            points = self.values.setdefault((spec["metric"], who), [])
            if len(points) < KEPT:
                points.append(Point(value, f"{source.path}:{line_no}"))
            else:  # keep the first half and the latest values
                del points[KEPT // 2]
                points.append(Point(value, f"{source.path}:{line_no}"))

    def _read(self, block: _Block) -> None:
        for number_, raw, line in zip(block.numbers, block.raws, block.lines, strict=True):
            self.see(raw, line, block.source, number_)

    def readings(self) -> list[dict[str, Any]]:
        """What the numbers say, most telling first; each with its conclusion and facts."""
        self.finish()
        return read_series(self.values, self.schedule)


def rank_or_host(raw: str, source: Source, many_sources: bool) -> str:
    """Whose value a line prints: the rank (its prefix, else its file's name), else the host as
    spread.who_wrote finds it; "" for one anonymous file. Numbers are compared per rank."""
    rank = line_rank(raw)
    rank = rank if rank is not None else source.rank
    if rank is not None:
        return f"rank {rank}"
    return who_wrote(raw, source, many_sources) or ""


def read_series(values: dict[tuple[str, str], list[Point]], schedule: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    named = len({who for _, who in values}) > 1
    for (metric, who), points in values.items():
        label = who if named else ""
        if metric == "loss":
            out.extend(_loss(points, label))
        elif metric == "lr":
            out.extend(_lr(points, label, schedule))
        elif metric == "step_time":
            out.extend(_spikes(points, label))
        elif metric == "loss_scale":
            out.extend(_scale(points, label))
        elif metric == "host_rss":
            out.extend(_rss(points, label))
    out.extend(_kv_stuck(values))
    out.extend(_slow_rank(values, "step_time", slower_is="higher"))
    out.extend(_slow_rank(values, "throughput", slower_is="lower"))
    out.sort(key=lambda r: ORDER.index(r["reading"]))
    problems = [r for r in out if r["reading"] not in HEALTHY]
    return problems or out[:1]


def _reading(kind: str, first: str, **facts: Any) -> dict[str, Any]:
    return {"reading": kind, "conclusion": CONCLUSIONS[kind], "first": first, "facts": facts}


def _loss(points: list[Point], who: str) -> list[dict[str, Any]]:
    finite = [p for p in points if math.isfinite(p.value)]
    bad = next((i for i, p in enumerate(points) if not math.isfinite(p.value)), None)
    if bad == 0:
        return [_reading("loss-nonfinite-from-start", points[0].where, who=who,
                         value=_name(points[0].value), at=points[0].where)]
    if bad is not None:
        return [_reading("loss-nonfinite", points[bad].where, who=who, value=_name(points[bad].value),
                         at=points[bad].where, finite=bad, last=_round(points[bad - 1].value))]
    jump = _jump(finite)
    if jump is not None:
        return [_reading("loss-jumps", finite[jump].where, who=who, before=_round(finite[jump - 1].value),
                         after=_round(finite[jump].value), at=finite[jump].where,
                         ratio=round(finite[jump].value / finite[jump - 1].value, 1))]
    if len(finite) < RULES["min_points"]:
        return []
    quarter, start, end = _quarters(finite)
    low = min(p.value for p in finite)
    if start > 0 and low > 0 and end >= RULES["climb_ratio"] * start and end >= RULES["climb_over_min"] * low:
        return [_reading("loss-climbs", finite[-quarter].where, who=who, start=_round(start),
                         end=_round(end), low=_round(low), count=len(finite))]
    if end <= start * (1 + RULES["steady_rise"]) or end <= low * RULES["steady_over_min"]:
        return [_reading("loss-steady", finite[0].where, who=who, start=_round(finite[0].value),
                         end=_round(finite[-1].value), count=len(finite))]
    return []


def _jump(finite: list[Point]) -> int | None:
    """The index of the first value at least jump_ratio times the one before it, when no later
    value comes back under half of it (a spike that recovers is noise); None without one."""
    for i in range(1, len(finite)):
        before, after = finite[i - 1].value, finite[i].value
        if (before >= RULES["jump_from"] and after >= RULES["jump_ratio"] * before
                and all(p.value >= after / 2 for p in finite[i + 1:])):
            return i
    return None


def _lr(points: list[Point], who: str, schedule: str) -> list[dict[str, Any]]:
    zeros = next((i for i, p in enumerate(points) if p.value != 0), len(points))
    rest = {p.value for p in points[zeros:]}
    if (len(points) >= RULES["min_points"] and RULES["lr_zero_run"] <= zeros < len(points) - 1
            and len(rest) == 1):
        return [_reading("lr-zero-then-constant", points[zeros].where, who=who, zeros=zeros,
                         value=_round(points[zeros].value), count=len(points) - zeros)]
    if len(points) < RULES["min_points"] or len({p.value for p in points}) != 1:
        return []
    if points[0].value == 0:  # nothing is learnt: no schedule or config means that
        return [_reading("lr-zero", points[0].where, who=who, count=len(points))]
    if schedule and len(points) >= RULES["lr_min_points"]:
        return [_reading("lr-constant", points[0].where, who=who, value=_round(points[0].value),
                         count=len(points), schedule=schedule)]
    return []


def _quarters(points: list[Point]) -> tuple[int, float, float]:
    """(the size of a quarter, the first quarter's mean, the last quarter's): a trend, not a blip."""
    quarter = max(1, len(points) // 4)
    return (quarter, sum(p.value for p in points[:quarter]) / quarter,
            sum(p.value for p in points[-quarter:]) / quarter)


def _scale(points: list[Point], who: str) -> list[dict[str, Any]]:
    drops = sum(b.value < a.value for a, b in zip(points, points[1:], strict=False))
    end = points[-1].value
    collapsed = drops >= RULES["scale_drops"] and end <= RULES["scale_low"]
    kept_falling = drops >= RULES["scale_run_drops"] and points[0].value <= RULES["scale_run_start"]
    # exact: a scale is a power of two, 65536 and not 65540
    if collapsed or kept_falling:
        return [_reading("loss-scale-collapses", points[-1].where, who=who, drops=drops,
                         start=points[0].value, end=end)]
    if drops >= RULES["scale_settle_drops"] and end >= RULES["scale_settled"]:
        return [_reading("loss-scale-settles", points[-1].where, who=who, drops=drops,
                         start=points[0].value, end=end)]
    return []


def _rss(points: list[Point], who: str) -> list[dict[str, Any]]:
    if len(points) < RULES["min_points"]:
        return []
    _, start, end = _quarters(points)
    if end < RULES["rss_ratio"] * start or end - start < RULES["rss_growth_gib"]:
        return []
    return [_reading("host-memory-grows", points[-1].where, who=who, start=_round(points[0].value),
                     end=_round(points[-1].value), count=len(points))]


def _spikes(every_step: list[Point], who: str) -> list[dict[str, Any]]:
    points = every_step[int(RULES["spike_warmup"]):]
    if len(points) < RULES["spike_min_points"]:
        return []
    typical = sorted(p.value for p in points)[(len(points) - 1) // 4]  # the lower quartile
    if typical <= 0:
        return []
    at = [i for i, p in enumerate(points) if p.value >= RULES["spike_ratio"] * typical]
    if len(at) < RULES["spike_min"] or len(at) > RULES["spike_max_share"] * len(points):
        return []
    gaps = Counter(b - a for a, b in zip(at, at[1:], strict=False))
    every, times = gaps.most_common(1)[0]
    if every < 2 or times < RULES["spike_regular_share"] * (len(at) - 1):
        return []
    spike = median(points[i].value for i in at)
    spiked = set(at)
    others = median(p.value for i, p in enumerate(points) if i not in spiked)
    return [_reading("step-spikes", points[at[0]].where, who=who, every=every, spike=_round(spike),
                     median=_round(others), count=len(at), points=len(every_step))]


def _kv_stuck(values: dict[tuple[str, str], list[Point]]) -> list[dict[str, Any]]:
    """vLLM's stats lines: the GPU KV cache was full, and the last lines have requests waiting
    while none runs (each stats line prints both counts, so the two series are aligned)."""
    out = []
    for (metric, who), usage in values.items():
        if metric != "kv_usage":
            continue
        running, waiting = values.get(("running", who), []), values.get(("waiting", who), [])
        tail = RULES["kv_stuck_lines"]
        full = next((p for p in usage if p.value >= RULES["kv_full_pct"]), None)
        if full is None or len(running) != len(waiting):
            continue
        stuck = _stuck_lines(running, waiting)
        if stuck >= tail:
            out.append(_reading("kv-cache-stuck", waiting[-stuck].where, who=who, peak=_round(full.value),
                                at=full.where, count=stuck, waiting=_round(waiting[-1].value)))
    return out


def _stuck_lines(running: list[Point], waiting: list[Point]) -> int:
    """How many stats lines at the end have requests waiting and none running."""
    stuck = 0
    for run, wait in zip(reversed(running), reversed(waiting), strict=True):
        if run.value != 0 or wait.value < 1:
            break
        stuck += 1
    return stuck


def _slow_rank(values: dict[tuple[str, str], list[Point]], metric: str,
               slower_is: str) -> list[dict[str, Any]]:
    per_who = {who: median(p.value for p in points) for (m, who), points in values.items()
               if m == metric and who and len(points) >= RULES["slow_min_points"]}
    if len(per_who) < 2:
        return []
    pick = max if slower_is == "higher" else min
    slow = pick(per_who, key=lambda who: per_who[who])
    others = median(v for who, v in per_who.items() if who != slow)
    if others <= 0 or per_who[slow] <= 0:
        return []
    ratio = per_who[slow] / others if slower_is == "higher" else others / per_who[slow]
    if ratio < RULES["slow_ratio"]:
        return []
    first = values[(metric, slow)][0].where
    return [_reading("slow-rank", first, slow=slow, metric=metric, value=_round(per_who[slow]),
                     others=_round(others), peers=len(per_who) - 1, ratio=round(ratio, 2))]


def _round(value: float | None) -> float | None:
    return None if value is None else float(f"{value:.4g}")


def _name(value: float) -> str:
    return "NaN" if math.isnan(value) else ("-Inf" if value < 0 else "Inf")


def describe_reading(reading: dict[str, Any], lang: str = "en") -> str:
    """One clause of what a reading shows, in `lang`."""
    if reading["reading"] in stacks.TEXTS:
        return stacks.describe_reading(reading, lang)
    if reading["reading"] in logends.TEXTS:
        return logends.describe_reading(reading, lang)
    if reading["reading"] in topology.TEXTS:
        return topology.describe_reading(reading, lang)
    if reading["reading"] == spread.READING:
        return spread.describe_reading(reading, lang)
    facts = dict(reading["facts"])
    if "metric" in facts:
        facts["metric"] = METRIC_NAMES[facts["metric"]][lang]
    if "who" in facts:
        who = facts["who"]
        facts["who"] = (f"（{who}）" if lang == "zh" else f" ({who})") if who else ""
    return TEXTS[reading["reading"]][lang].format(**{k: shown(v) for k, v in facts.items()})


def describe(readings: list[dict[str, Any]], lang: str = "en") -> str:
    """One sentence: what the stack dumps and the numbers show."""
    zh = lang == "zh"
    sep = "；" if zh else "; "
    dumps = [r for r in readings if r["reading"] in stacks.TEXTS]
    ends = [r for r in readings if r["reading"] in logends.TEXTS]
    links = [r for r in readings if r["reading"] in topology.TEXTS]
    numbers = [r for r in readings if r["reading"] not in stacks.TEXTS and r["reading"] not in logends.TEXTS
               and r["reading"] not in topology.TEXTS]
    said = []
    for group, head in ((dumps, "从调用栈看：" if zh else "the stacks: "),
                        (ends, "从日志结尾看：" if zh else "the log's end: "),
                        (links, "从 GPU 之间的连接看：" if zh else "how the GPUs connect: "),
                        (numbers, "从数值看：" if zh else "the numbers: ")):
        if group:
            said.append(head + sep.join(describe_reading(r, lang) for r in group))
    return sep.join(said)


