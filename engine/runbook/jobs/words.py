"""How findings name ranks and hosts."""

from __future__ import annotations


def ranges(ranks: list[int]) -> str:
    """`0-2, 5` for [0, 1, 2, 5], `0, 1` for [0, 1]: runs of three or more as a range."""
    parts: list[str] = []
    ordered = sorted(set(ranks))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.extend([f"{ordered[i]}-{ordered[j]}"] if j - i >= 2 else [str(r) for r in ordered[i:j + 1]])
        i = j + 1
    return ", ".join(parts)


def ranks_word(ranks: list[int], lang: str = "en") -> str:
    """`rank 3` / `ranks 0-2` (zh: `rank 3` / `rank 0-2`)."""
    if lang == "zh":
        return f"rank {ranges(ranks)}"
    return f"rank{'s' if len(set(ranks)) > 1 else ''} {ranges(ranks)}"


NAMED_MAX = 16  # hosts named in one finding; the rest are counted (a finding is read, not parsed)


def named(items: list[str], lang: str = "en", sep: str = ", ") -> str:
    """`a, b, c`: at most NAMED_MAX of the items, then `and N more` (zh: `等另外 N 个`). The job's
    result keeps every host in its lists (`hosts`, `nodes`); only its sentence stops."""
    shown = sep.join(items[:NAMED_MAX])
    more = len(items) - NAMED_MAX
    if more <= 0:
        return shown
    return shown + (f" 等另外 {more} 个" if lang == "zh" else f" and {more} more")
