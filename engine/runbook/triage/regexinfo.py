"""What a regex promises about the text it matches, read from its parse tree.

Triage runs every signature over logs of any size, so it asks each regex three things
once: how much literal text a match must contain (specificity), which literal strings
a match cannot do without (a cheap `in` test before the regex runs), and whether all
digits look alike to it (then lines that differ only in their numbers, like step and
loss lines, need to be matched once).
"""

from __future__ import annotations

import re
from typing import Any

try:  # the regex parser moved in Python 3.11
    import re._parser as _sre_parse  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover (Python 3.10)
    import sre_parse as _sre_parse  # type: ignore[no-redef]

DIGITS_TO_ZERO = str.maketrans("123456789", "000000000")
_BYTE_DIGITS_TO_ZERO = bytes.maketrans(b"123456789", b"000000000")
_REPEATS = ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")
_MIN_ATOM = 3  # display columns: three Latin letters, or two CJK characters

Needs = list[frozenset[str]]  # every set: a match contains at least one of its strings


def mask_digits(text: str) -> str:
    """`text` with every ASCII digit turned into 0 (through bytes: str.translate is slow)."""
    raw = text.encode("utf-8", "surrogatepass").translate(_BYTE_DIGITS_TO_ZERO)
    return raw.decode("utf-8", "surrogatepass")


def parse(pattern: str) -> list[Any] | None:
    """The parse tree of `pattern`, or None when it does not parse."""
    try:
        return list(_sre_parse.parse(pattern))
    except (re.error, RecursionError, ValueError, TypeError, OverflowError):
        return None


def literal_weight(pattern: str) -> float:
    """How many literal characters every match must contain (a character class counts a quarter)."""
    tree = parse(pattern)
    if tree is None:
        return float(len(re.sub(r"\\.|[^\w ]", "", pattern)))
    return _weight(tree)


def _weight(items: list[Any]) -> float:
    total = 0.0
    for op, av in items:
        name = str(op)
        if name == "LITERAL":
            total += 1
        elif name in ("IN", "NOT_LITERAL"):
            total += 0.25
        elif name in _REPEATS:
            total += min(av[0], 8) * _weight(list(av[2]))
        elif name == "SUBPATTERN":
            total += _weight(list(av[-1]))
        elif name == "ATOMIC_GROUP":
            total += _weight(list(av))
        elif name == "BRANCH":
            total += min((_weight(list(b)) for b in av[1]), default=0.0)
    return total


def required_text(pattern: str) -> list[Needs]:
    """Alternatives (one per top-level `|` branch) of what a match cannot do without.

    Strings are lowercased and their digits turned into 0, so they may be looked for in
    text treated the same way. A branch with nothing required makes the list useless:
    then [[]] is returned, which every text satisfies.
    """
    tree = parse(pattern)
    if tree is None:
        return [[]]
    branches = _top_branches(tree)
    out = [_needs(branch) for branch in branches]
    return [[]] if any(not needs for needs in out) else out


def may_match(alternatives: list[Needs], text: str) -> bool:
    """Whether `text` (lowercased, digits as 0) holds what some alternative requires."""
    return any(all(any(s in text for s in choice) for choice in needs) for needs in alternatives)


def _top_branches(tree: list[Any]) -> list[list[Any]]:
    items = tree
    while len(items) == 1 and str(items[0][0]) == "SUBPATTERN":
        items = list(items[0][1][-1])
    if len(items) == 1 and str(items[0][0]) == "BRANCH":
        return [list(b) for b in items[0][1][1]]
    return [tree]


def _needs(items: list[Any]) -> Needs:
    needs: Needs = []
    run: list[str] = []

    def flush() -> None:
        text = "".join(run).lower().translate(DIGITS_TO_ZERO)
        if _columns(text) >= _MIN_ATOM:
            needs.append(frozenset({text}))
        run.clear()

    for op, av in items:
        name = str(op)
        if name == "LITERAL":
            run.append(chr(av))
            continue
        flush()
        if name == "SUBPATTERN":
            needs.extend(_needs(list(av[-1])))
        elif name in _REPEATS and av[0] >= 1:
            needs.extend(_needs(list(av[2])))
        elif name == "ATOMIC_GROUP":
            needs.extend(_needs(list(av)))
        elif name == "BRANCH":
            choices = [_best(_needs(list(b))) for b in av[1]]
            if all(choices):
                needs.append(frozenset().union(*choices))  # type: ignore[arg-type]
    flush()
    return needs


def _best(needs: Needs) -> frozenset[str] | None:
    """The most selective requirement: longest shortest string, then fewest strings."""
    return max(needs, key=lambda s: (min(map(_columns, s)), -len(s)), default=None)


def _columns(text: str) -> int:
    return sum(2 if ord(ch) > 0x2E7F else 1 for ch in text)


def digit_uniform(pattern: str) -> bool:
    """Whether the regex treats every ASCII digit alike (no literal digit, no class of some digits).

    Then turning every digit of a text into 0 does not change where it matches.
    """
    tree = parse(pattern)
    return tree is not None and _uniform(tree)


def _uniform(items: list[Any]) -> bool:
    for op, av in items:
        name = str(op)
        if name in ("LITERAL", "NOT_LITERAL") and chr(av).isdigit():
            return False
        if name == "IN" and not all(_class_uniform(o, a) for o, a in av):
            return False
        if name in ("GROUPREF", "GROUPREF_EXISTS"):
            return False
        if name in _REPEATS and not _uniform(list(av[2])):
            return False
        if name == "SUBPATTERN" and not _uniform(list(av[-1])):
            return False
        if name in ("ASSERT", "ASSERT_NOT") and not _uniform(list(av[1])):
            return False
        if name == "ATOMIC_GROUP" and not _uniform(list(av)):
            return False
        if name == "BRANCH" and not all(_uniform(list(b)) for b in av[1]):
            return False
    return True


def _class_uniform(op: Any, av: Any) -> bool:
    name = str(op)
    if name == "LITERAL":
        return not chr(av).isdigit()
    if name == "RANGE":
        low, high = av
        covered = sum(1 for d in range(ord("0"), ord("9") + 1) if low <= d <= high)
        return covered in (0, 10)
    return True  # CATEGORY (\d, \w, \s and their negations), NEGATE


class NeedleIndex:
    """`may_match` for many patterns at once: one pass of RE2's Set over a text finds every
    required string it holds (a substring search per string and pattern was an eighth of
    triage's time on a large log), then each pattern whose strings may be there is checked
    on those found. None of this without RE2 (`build` returns None: `may_match` it is)."""

    MAX_MEM = 16 << 20  # the Set's automaton: all literals, a few MB; room so it never gives up

    def __init__(self, matcher: Any, ids: dict[str, int], needs: list[list[Needs]]) -> None:
        self._matcher = matcher
        self._always: set[int] = set()  # patterns that require nothing
        self._by_needle: dict[int, list[int]] = {}
        self._plans: list[list[list[frozenset[int]]]] = []
        for index, alternatives in enumerate(needs):
            plan = [[frozenset(ids[s] for s in choice) for choice in alternative]
                    for alternative in alternatives]
            self._plans.append(plan)
            if any(not alternative for alternative in plan):
                self._always.add(index)
            for needle in {n for alternative in plan for choice in alternative for n in choice}:
                self._by_needle.setdefault(needle, []).append(index)

    @classmethod
    def build(cls, needs: list[list[Needs]]) -> NeedleIndex | None:
        try:
            import re2
        except ImportError:  # pragma: no cover - exercised only where the wheel is missing
            return None
        options = re2.Options()
        options.max_mem = cls.MAX_MEM
        matcher = re2.Set.SearchSet(options)
        needles = sorted({s for alternatives in needs for alternative in alternatives
                          for choice in alternative for s in choice})
        ids = {needle: matcher.Add(re2.escape(needle)) for needle in needles}
        matcher.Compile()
        # The automaton must see every string it holds: else it is not to be trusted.
        if needles and len(set(matcher.Match("\n".join(needles)))) != len(needles):
            return None  # pragma: no cover - RE2 ran out of memory
        return cls(matcher, ids, needs)

    def candidates(self, text: str) -> list[int]:
        """The patterns (by their index in `needs`) that may match `text`, in that order."""
        present = set(self._matcher.Match(text) or ()) if self._by_needle else set()
        maybe = set(self._always)
        for needle in present:
            maybe.update(self._by_needle[needle])
        return [index for index in sorted(maybe)
                if any(all(not choice.isdisjoint(present) for choice in alternative)
                       for alternative in self._plans[index])]
