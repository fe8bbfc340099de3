""""Did you mean" over many names, without comparing every unknown name with every known one.

`Suggestions(names).closest(word)` gives exactly what `difflib.get_close_matches(word, names,
n=1, cutoff=0.6)` gives (the highest ratio; on a tie, the greatest name), but proves most
names cannot win before paying for `SequenceMatcher.ratio()`:

- ratio <= quick_ratio (shared characters) <= real_quick_ratio (the lengths alone), so names
  are visited by length, best length bound first, and a length whose bound is below the best
  ratio found so far ends the search;
- the names next to `word` in sorted order (a shared prefix: a typo at the end, a renamed
  id with a suffix) are scored first, so the best ratio is high early and prunes the rest;
- each unknown word is answered once (a broken id is usually named by many references).

A library with thousands of broken references to a thousand runbooks was quadratic with
difflib alone (tens of seconds); this keeps lint's suggestions, text and order unchanged.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable
from difflib import SequenceMatcher

CUTOFF = 0.6
NEIGHBOURS = 4  # names either side of `word` in sorted order, scored first to seed the bound


def _multiset(text: str) -> frozenset[tuple[str, int]]:
    """`text`'s characters as a set, the n-th copy of a character as (char, n): the size of
    the intersection of two of these is the number of characters two strings share."""
    seen: Counter[str] = Counter()
    out = []
    for char in text:
        out.append((char, seen[char]))
        seen[char] += 1
    return frozenset(out)


def _bound(matches: int, length: int) -> float:
    """difflib's own ratio formula (same float for the same counts)."""
    return 2.0 * matches / length if length else 1.0


class Suggestions:
    """An index of known names for repeated "did you mean" look-ups."""

    def __init__(self, names: Iterable[str], cutoff: float = CUTOFF) -> None:
        self.cutoff = cutoff
        self.names = list(names)  # indexed on the first look-up: a clean library never asks
        self.sorted: list[str] = []
        self.by_length: dict[int, list[str]] = {}
        self.chars: dict[str, frozenset[tuple[str, int]]] = {}  # for the quick_ratio bound
        self.memo: dict[str, str | None] = {}

    def _index(self) -> None:
        self.sorted = sorted(set(self.names))
        for name in self.sorted:
            self.by_length.setdefault(len(name), []).append(name)
            self.chars[name] = _multiset(name)

    def closest(self, word: str) -> str | None:
        """The name difflib.get_close_matches(word, names, n=1, cutoff) would give, or None."""
        if word not in self.memo:
            self.memo[word] = self._search(word)
        return self.memo[word]

    def hint(self, word: str) -> str:
        """` (did you mean 'x'?)` for the closest name, or an empty string."""
        close = self.closest(word)
        return f" (did you mean {close!r}?)" if close is not None else ""

    def _search(self, word: str) -> str | None:
        if not self.sorted and self.names:
            self._index()
        matcher = SequenceMatcher()
        matcher.set_seq2(word)  # difflib's get_close_matches puts the word second too (its b side)
        wanted = _multiset(word)
        size, cutoff, chars = len(word), self.cutoff, self.chars
        best_score, best_name = -1.0, ""
        at = bisect.bisect_left(self.sorted, word)
        seeds = self.sorted[max(0, at - NEIGHBOURS):at + NEIGHBOURS]
        lengths = sorted(self.by_length, key=lambda n: _bound(min(n, size), n + size), reverse=True)
        groups = [seeds] + [self.by_length[n] for n in lengths]
        bounds = [1.0] + [_bound(min(n, size), n + size) for n in lengths]
        for group, bound in zip(groups, bounds, strict=True):
            # A name can still win on a tie (the greater name wins), so only a lower bound stops.
            if bound < cutoff or bound < best_score:
                break
            for name in group:
                floor = cutoff if cutoff > best_score else best_score
                total = len(name) + size
                if _bound(min(len(name), size), total) < floor:
                    continue
                # difflib's quick_ratio (characters in common), as one set intersection.
                if _bound(len(wanted & chars[name]), total) >= floor:
                    matcher.set_seq1(name)
                    score = matcher.ratio()
                    if score >= cutoff and (score, name) > (best_score, best_name):
                        best_score, best_name = score, name
        return best_name if best_score >= 0 else None
