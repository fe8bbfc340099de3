"""`runbook run ... --watch [INTERVAL]`: walk again and again until something changes.

Seed 000's advice is "wait, the data loader is still tokenising"; --watch turns it into a
command that says when waiting is over. It walks the tree every INTERVAL seconds and
stops when any node's conclusion (or status) differs from the first walk's: the job
started making progress, died, or got stuck somewhere else. Between walks it prints one
line per node with the freshest progress it saw (e.g. `Token buffer: 5000/65537 (7.6%)`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import TextIO

from runbook.run.walk import NodeOutcome, Walk

_FRACTION = re.compile(r"(\d[\d,]*)\s*/\s*(\d[\d,]*)")


def state(outcome: NodeOutcome) -> str:
    """What counts as "the same" between two walks: the conclusion, or the status."""
    return outcome.conclusion.id if outcome.conclusion else outcome.status


def progress_hint(outcome: NodeOutcome) -> str:
    """The freshest progress line the checks found: a log pattern named *progress* or *step*."""
    for evidence in reversed(outcome.evidence):
        patterns = evidence.result.get("patterns") if isinstance(evidence.result, dict) else None
        for name, found in (patterns or {}).items():
            if not isinstance(found, dict) or not found.get("count"):
                continue
            if "progress" in name or "step" in name:
                line = str(found.get("last_line") or "").strip()
                return _with_percent(line)[-90:]
    return ""


def _with_percent(line: str) -> str:
    match = _FRACTION.search(line)
    if not match:
        return line
    done, total = (int(g.replace(",", "")) for g in match.groups())
    return f"{line} ({100.0 * done / total:.1f}%)" if total else line


def watch(make_walk: Callable[[], Walk], interval: float, out: TextIO,
          max_s: float | None = None) -> tuple[Walk, list[NodeOutcome], bool]:
    """Walk until a node's state changes, `max_s` passes, or Ctrl-C; return the last walk,
    its outcomes, and whether it was interrupted."""
    begin = time.monotonic()
    walk = make_walk()
    try:
        outcomes = walk.run()
    except KeyboardInterrupt:
        return walk, walk.outcomes, True
    first = {o.node.name: state(o) for o in outcomes}
    rounds = 1
    while True:
        _print_round(out, rounds, outcomes, begin)
        if max_s is not None and time.monotonic() - begin + interval > max_s:
            print(f"runbook: --watch: nothing changed in {max_s:g} s; stopping", file=out, flush=True)
            return walk, outcomes, False
        try:
            time.sleep(interval)
            walk = make_walk()
            outcomes = walk.run()
        except KeyboardInterrupt:
            return walk, walk.outcomes, True
        rounds += 1
        changed = [o for o in outcomes if first.get(o.node.name) != state(o)]
        if changed:
            _print_round(out, rounds, outcomes, begin)
            names = ", ".join(f"{o.node.name}: {first.get(o.node.name)} → {state(o)}" for o in changed)
            print(f"runbook: --watch: changed after {time.monotonic() - begin:.0f} s ({names})",
                  file=out, flush=True)
            return walk, outcomes, False


def _print_round(out: TextIO, rounds: int, outcomes: list[NodeOutcome], begin: float) -> None:
    elapsed = time.monotonic() - begin
    for outcome in outcomes:
        hint = progress_hint(outcome)
        print(f"[watch #{rounds} {elapsed:5.0f}s] {outcome.node.name}: {state(outcome)}"
              + (f"  ·  {hint}" if hint else ""), file=out, flush=True)


