"""How much one matched signature says: specificity of its regex, how often and how late it matched.

A signature is specific when every match of it must contain many literal characters
(`Watchdog caught collective operation timeout`) and generic when it also matches the
lines every crashed Python job prints (`Traceback (most recent call last):`). Repeats
count, with diminishing returns and a cap. The failure that ended the run is the last
one in the log, so signatures whose last match comes later weigh more.
"""

from __future__ import annotations

import math
import re

from runbook.triage.regexinfo import literal_weight

# Lines any failed job prints, whatever went wrong: a signature matching one is generic.
GENERIC_LINES = (
    "Traceback (most recent call last):",
    '  File "/opt/conda/lib/python3.10/site-packages/torch/nn/modules/module.py", line 1518, '
    "in _wrapped_call_impl",
    "    return forward_call(*args, **kwargs)",
    "RuntimeError: Error",
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
GENERIC_FACTOR = 0.2
COUNT_CAP = 32  # matches beyond this add nothing
KEEP_LINES = 3  # first and last matched lines kept per signature


def specificity(pattern: str) -> float:
    """Weight of one match of this signature: long literal text high, generic patterns low."""
    weight = math.sqrt(max(literal_weight(pattern), 1.0) / 10.0)
    weight = min(max(weight, 0.3), 2.5)
    return weight * GENERIC_FACTOR if is_generic(pattern) else weight


def is_generic(pattern: str) -> bool:
    """Whether the pattern matches a line every failed job prints."""
    try:
        regex = re.compile(pattern)
    except re.error:
        return False
    return any(regex.search(line) for line in GENERIC_LINES)


def count_factor(count: int) -> float:
    """1 for one match, growing with the logarithm of the count up to COUNT_CAP."""
    return 1.0 + math.log2(min(max(count, 1), COUNT_CAP)) / 3.0


def recency_factor(rank: int) -> float:
    """rank 0: this signature matched the latest line of all matched signatures."""
    return 1.0 + 1.5 / (1 + rank)
