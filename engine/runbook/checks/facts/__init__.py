"""Facts from the error messages every on-call engineer reads, one module per message family.

Each family's `parse(lines)` takes log lines (from a file, a check's output or a pasted log; any
launcher or logger prefix may come before the message) and returns a dict of plain JSON values
(str, int, float, bool, None, list, dict), or None when none of its messages occur. Runbook
conditions compare these facts, so every size is in MiB and every field is documented in its
module's docstring:

- cuda_oom: PyTorch's CUDA out-of-memory messages (cuda_oom.py)
- nccl: NCCL's WARN and INFO lines and the NCCL errors PyTorch raises (nccl.py)
- watchdog: PyTorch's NCCL watchdog timeouts (watchdog.py)
- rendezvous: rendezvous and TCPStore timeouts and failures (rendezvous.py)
- state_dict: `load_state_dict`'s missing and unexpected keys, and the prefix between them (state_dict.py)
- xid: the NVIDIA driver's Xid events (xid.py)

Standard library only, for any Python from 3.8: this runs on the training nodes inside the probe
as well as on the client. Bounded: each line is cut to `_text.MAX_LINE` characters before it is
matched, a family tests a literal substring before any regex, no regex nests quantifiers, and
lists are capped (`_text.MAX_ITEMS`), so the work is linear in the input.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from runbook.checks.facts import cuda_oom, nccl, rendezvous, state_dict, watchdog, xid

FAMILIES: dict[str, Callable[[Sequence[str]], dict[str, Any] | None]] = {
    "cuda_oom": cuda_oom.parse,
    "nccl": nccl.parse,
    "watchdog": watchdog.parse,
    "rendezvous": rendezvous.parse,
    "state_dict": state_dict.parse,
    "xid": xid.parse,
}


def extract(lines: Sequence[str]) -> dict[str, dict[str, Any]]:
    """{family: facts} for every family whose messages occur in the lines (absent families omitted)."""
    if isinstance(lines, str):
        lines = lines.splitlines()
    found = {}
    for name, parse in FAMILIES.items():
        facts = parse(lines)
        if facts is not None:
            found[name] = facts
    return found
