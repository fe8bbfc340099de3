"""The rules `runbook triage` ranks by, as data, written once.

The CLI applies them (score.py, verdict.py, ordering.py, fallback.py); site/triage_export.py
writes them into the triage page's data, and the page (site/static/triage.js) applies the same
object, so a change to the ranking is made here and nowhere else. Everything here is plain JSON
(lists, not tuples): what the page reads back is what Python applied.

- `roles`: what a match is to the failure, most telling first. The table's order is one rule
  used three times: a match takes the first role any of its signatures has (one `cause`
  signature makes it a cause), the verdict is the first role any match has, and the `role` sort
  key puts matches in this order. `confidence`: the share of its evidence's confidence a match in
  that role keeps (a knock-on says less about what to fix than a cause). `healthy` is the answer
  where nothing else was found and the numbers read as well (verdict.healthy); it names no failure,
  so the verdict stays no-error.
- `evidence`: one entry per kind of evidence a match rests on, with the formulas (formula.py:
  JSON expressions, operator first) that weigh it. A new kind (a stack dump of hung ranks, a
  metric series) is a new entry, and its matches take their place in `order` through the same
  fields.
  - `signature`: log lines a runbook's regex matched. `weight`: what one match of the regex
    weighs, from `literal` (how much literal text every match must hold, regexinfo.py) and
    `generic` (it also matches lines any failed job prints, score.py); `strength`: what the
    regex's `count` matches in one file add to the match's score (with its `weight`, `generic`);
    `confidence`: the match's, from its best signature's `weight` and `count`, whether all its
    signatures are `generic`, and its `score`.
  - `similar`: an error line no signature knows, compared with every conclusion and article by
    BM25 (fallback.py): the `top` few that score `min_score` or more, each with a `confidence`
    from its `score` and the `best` score.
  - `case`: the labelled public reports a log resembles most (cases.py): the `neighbours`
    nearest at `min_similarity` or more vote for their conclusions; each vote is a `similar`
    match after the signatures' and readings' matches while there are fewer than `fill_to`;
    when only resemblance speaks, the votes and BM25's matches are ranked together (by
    `text_weight` and `full_similarity`, result.py), a conclusion both name once; its
    `confidence` from the nearest case's `similarity` and the vote's `share` of all the votes.
  - `reading`: what a pasted stack dump (stacks.py) or the numbers (series.py) show, as a match
    of the conclusion it names when no specific signature matched; a cause, or a knock-on for
    the conclusions in `knock_on` (a rank waiting on others); its `confidence` is lower for a
    reading that is a `guess` (a stack dump that names no wait).
- `confidence_digits`: a confidence is the evidence's times the role's share, rounded to this
  many decimals.
- `order`: the sort keys, the first deciding: `role` (its place in `roles`), `generic` (specific
  before generic), `catch_all` (a conclusion the library marks `generic: true`, its last resort
  such as `system-error-unexplained`, after the conclusions that name a cause: NCCL's last
  error says more than the `unhandled system error` that wraps it), `position` (the earliest
  line: file, then line number; a match without one last), `score`; `descending` reverses a key.
- `by_time`: within each run of matches equal on the `within` keys, earlier timestamps first
  when every match of the run has one (date and time when all have a date, else the time of
  day), so lines of different files are ordered by the clock, not by which file was read first;
  `None` drops the rule.
- `lines`: `kept`: the first and the last matched lines kept per signature and file; `shown`:
  matched lines shown per match, `shown_first` of them from the start and the rest from the end.
- `refine`: the facts of a match's own lines (checks/facts/, the numbers in the message) that
  move it to a more specific conclusion of the same failure: when the `fact` (family, name) of
  the lines of a match of `conclusion` is true, the match is `becomes`' (merged with a match
  already there), in `role` when the rule gives one (what the facts show may be the cause where
  each line alone was a knock-on). The runbook's own branches decide the same from the same facts.
"""

from __future__ import annotations

from typing import Any

RANKING: dict[str, Any] = {
    "roles": [
        {"id": "cause", "confidence": 1.0},
        {"id": "knock-on", "confidence": 0.6},
        {"id": "similar", "confidence": 1.0},  # its evidence's confidence (0.1..0.3) says it all
        # numbers read as well (a steady loss, a loss scale calibrating), nothing else found: no failure
        {"id": "healthy", "confidence": 1.0},
    ],
    "evidence": {
        "signature": {
            # min(max(sqrt(max(literal, 1) / 10), 0.3), 2.5) * (0.2 if generic else 1)
            "weight": ["*", ["min", ["max", ["sqrt", ["/", ["max", "literal", 1], 10]], 0.3], 2.5],
                       ["if", "generic", 0.2, 1]],
            # weight * (1 + log2(min(max(count, 1), 32)) / 3): repeats count, up to 32 of them
            "strength": ["*", "weight", ["+", 1, ["/", ["log2", ["min", ["max", "count", 1], 32]], 3]]],
            # 0.2 if generic else min(0.95, 0.45 + 0.25 * log2(1 + weight))
            "confidence": ["if", "generic", 0.2,
                           ["min", 0.95, ["+", 0.45, ["*", 0.25, ["log2", ["+", 1, "weight"]]]]]],
        },
        "similar": {
            "top": 3,
            "min_score": 2.0,  # a BM25 total below this is noise
            # 0.1 + 0.2 * score / best: 0.1..0.3, a resemblance and no more
            "confidence": ["+", 0.1, ["/", ["*", 0.2, "score"], "best"]],
        },
        "case": {
            "neighbours": 5,
            "min_similarity": 0.1,  # TF-IDF cosine: below it a case shares only common words
            "fill_to": 3,  # after a cause or knock-on, only while the answer has fewer matches
            # in a `similar` answer, the reports' votes and BM25's text matches in one order:
            # a vote's score over the best vote's, times min(1, its nearest case's similarity /
            # full_similarity), plus text_weight times a text match's score over the best one's
            # (result.py `_fused`; on the dev split, leave-one-out, better first answers than
            # either alone or taking turns)
            "text_weight": 0.7,
            "full_similarity": 0.3,
            # 0.1 + 0.2 * similarity * share: 0.1..0.3, a resemblance like `similar`
            "confidence": ["+", 0.1, ["*", 0.2, ["*", "similarity", "share"]]],
        },
        "reading": {
            # what a stack dump or the numbers show, with no error line to confirm it: added only
            # when no specific signature matched (result.py); a knock-on when it waits on others
            # 0.2 for a guess (a dump that names no wait), else 0.5
            "confidence": ["if", "guess", 0.2, 0.5],
            "knock_on": ["training-hang:collective-wait", "training-hang:waiting-in-rendezvous",
                         "ray-hang:collect-never-returns", "training-hang:log-stalled",
                         "rlhf-hang:stage-unknown"],
        },
    },
    "confidence_digits": 2,
    "order": [
        {"key": "role"},
        {"key": "generic"},
        {"key": "catch_all"},
        {"key": "position"},
        {"key": "score", "descending": True},
    ],
    "by_time": {"within": ["role", "generic", "catch_all"]},
    "lines": {"kept": 3, "shown": 10, "shown_first": 3},
    "refine": [
        # an OOM with enough memory in use outside the process for the request (cuda-oom's
        # gpu-state branches read the same fact)
        {"conclusion": "cuda-oom:oom-batch-or-model", "fact": ["cuda_oom", "caused_elsewhere"],
         "becomes": "cuda-oom:gpu-held-by-other-process"},
        # missing and unexpected keys that differ by a wrapper's prefix (`module.`, `_orig_mod.`):
        # checkpoint-problems' read-log and inspect steps conclude the same
        {"conclusion": "checkpoint-problems:config-mismatch", "fact": ["state_dict", "explained_by_prefix"],
         "becomes": "checkpoint-problems:prefix-mismatch"},
        # watchdog timeouts of ranks waiting in different collectives (ALLREDUCE #315 on one,
        # _ALLGATHER_BASE #313 on another): the ranks' code called different collectives, the
        # cause and not a knock-on (ddp-errors' code-path step concludes the same on the nodes)
        {"conclusion": "training-hang:crashed-collective-timeout",
         "fact": ["watchdog", "ranks_in_different_collectives"], "becomes": "ddp-errors:code-path-mismatch",
         "role": "cause"},
        {"conclusion": "ddp-errors:rank-failed-first", "fact": ["watchdog", "ranks_in_different_collectives"],
         "becomes": "ddp-errors:code-path-mismatch", "role": "cause"},
        # watchdog timeouts only in one-element collectives among the job's first (a barrier at
        # SeqNum 3): the ranks waited at set-up for one still busy with its own work (tokenising,
        # preprocessing), the cause and not a knock-on (training-hang's exit step concludes the same)
        {"conclusion": "training-hang:crashed-collective-timeout",
         "fact": ["watchdog", "waits_in_first_collectives"], "becomes": "training-hang:rank-busy-at-set-up",
         "role": "cause"},
    ],
}
