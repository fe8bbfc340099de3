"""How much one matched signature says: the specificity of its regex and how often it matched.

A signature is specific when every match of it must contain many literal characters
(`Watchdog caught collective operation timeout`) and generic when it also matches the
lines every crashed Python job prints (`Traceback (most recent call last):`). Repeats
count, with diminishing returns and a cap. The formulas are the ranking's data
(ranking.py, `evidence.signature`); this module gives them their names.
"""

from __future__ import annotations

import re

from runbook.triage.formula import evaluate
from runbook.triage.ranking import RANKING
from runbook.triage.regexinfo import literal_weight

# Lines any failed job prints, whatever went wrong, and wrappers that only announce the errors
# listed on the lines after them: a signature matching one is generic (the detail's own
# signature, such as load_state_dict's `size mismatch for ...`, then ranks first).
GENERIC_LINES = (
    "Traceback (most recent call last):",
    '  File "/opt/conda/lib/python3.10/site-packages/torch/nn/modules/module.py", line 1518, '
    "in _wrapped_call_impl",
    "    return forward_call(*args, **kwargs)",
    "RuntimeError: Error",
    "RuntimeError: Error(s) in loading state_dict for Model:",
    "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 "
    "(pid: 4242) of binary: /usr/bin/python3",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
    "train.py FAILED",
    "Root Cause (first observed failure):",
    "  exitcode  : 1 (pid: 4242)",
    "srun: error: gpu001: task 3: Exited with exit code 1",
    "Killed",
    "Error",
    "error",
    "Exception",
    "WARNING: something went wrong",
    "[rank0]: Traceback (most recent call last):",
    "INFO:root:step 100 loss 2.345",
    "Epoch 1/10: 100%|██████████| 500/500 [01:23<00:00,  6.00it/s]",
)


def specificity(pattern: str) -> float:
    """Weight of one match of this signature: long literal text high, generic patterns low."""
    names = {"literal": literal_weight(pattern), "generic": is_generic(pattern)}
    return float(evaluate(RANKING["evidence"]["signature"]["weight"], names))


def is_generic(pattern: str) -> bool:
    """Whether the pattern matches a line every failed job prints."""
    try:
        regex = re.compile(pattern)
    except re.error:
        return False
    return any(regex.search(line) for line in GENERIC_LINES)


def strength(weight: float, count: int, generic: bool) -> float:
    """What a signature's `count` matches in one file add to its match's score."""
    names = {"weight": weight, "count": count, "generic": generic}
    return float(evaluate(RANKING["evidence"]["signature"]["strength"], names))


def kept_lines() -> int:
    """How many of the first and of the last matched lines are kept per signature and file."""
    return int(RANKING["lines"]["kept"])
