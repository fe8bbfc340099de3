"""What a log shows besides its signatures' lines, each read as evidence with the conclusion it
points to: the numbers as series (`series.py`), pasted stack dumps (`stacks.py`), what differs
across hosts and ranks (`spread.py`), a paste that just stops (`logends.py`), and a pasted GPU
topology and copies between GPUs (`topology.py`). The site's triage page applies the same rules
(site/triage_export.py).
"""

from __future__ import annotations

from typing import Any


def shown(value: Any) -> Any:
    """A fact as a reading's text prints it: an integral float as an int (`13`, as the page's
    `String(13)`; Python would print `13.0`)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return int(value)
    return value
