"""Hostile runbook files are refused quickly, in little memory, with file:line: reason.

Each file here is small; each would, without the bounds in format/safeyaml.py, make the
loader (and every command that loads the library) run for minutes or grow past gigabytes.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from runbook.format import safeyaml
from runbook.format.loader import MAX_BRANCHES, load_file, load_text
from runbook.format.yamlpos import DuplicateKeyError, parse

ROOT = Path(__file__).resolve().parents[2]
HEAD = "apiVersion: runbook/v1\nid: hostile\nversion: 1.0.0\n"


def billion_laughs(levels: int = 10) -> str:
    lines = [HEAD + 'a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def only_problem(text: str) -> str:
    [problem] = load_text(text, "h.yaml").problems
    return str(problem)


def test_the_alias_bomb_is_refused_at_the_alias_that_expands_it() -> None:
    started = time.monotonic()
    message = only_problem(billion_laughs())
    assert message == ("h.yaml:9:10: (document): more than 100,000 values in one document "
                       "once its aliases are expanded")
    assert time.monotonic() - started < 10  # a hang detector, not a benchmark (it takes ~10 ms)


def test_aliases_within_the_budget_still_share_a_value() -> None:
    # The library shares fix commands this way (`run: &fewer-workers |` ... `run: *fewer-workers`).
    data, _ = parse("a: &cmd echo hi\nb: *cmd\nc: &list [1, 2]\nd: *list\n")
    assert data == {"a": "echo hi", "b": "echo hi", "c": [1, 2], "d": [1, 2]}


def test_a_key_of_its_own_overrides_a_merged_one_but_not_its_twin() -> None:
    # YAML's merge key: `<<: *base` then `b: 2` is an override (test files use it for nodes that
    # differ in one step); `b` twice in the mapping's own keys stays an error.
    data, _ = parse("base: &x {b: 1, c: 3}\nnode:\n  <<: *x\n  b: 2\n")
    assert data["node"] == {"b": 2, "c": 3}
    with pytest.raises(DuplicateKeyError, match="duplicate key 'b'"):
        parse("base: &x {c: 3}\nnode:\n  <<: *x\n  b: 1\n  b: 2\n")


def test_deep_nesting_is_refused_where_it_goes_too_deep() -> None:
    assert only_problem(HEAD + "x: " + "[" * 200 + "]" * 200 + "\n") == (
        # The document's own mapping is the first level: the 64th `[` is the 65th.
        f"h.yaml:4:{3 + safeyaml.MAX_DEPTH}: (document): nested deeper than {safeyaml.MAX_DEPTH} levels")
    started = time.monotonic()  # libyaml's own scanner stops far deeper flow nesting first
    assert "nesting depth" in only_problem(HEAD + "x: " + "[" * 100_000 + "]" * 100_000 + "\n")
    assert time.monotonic() - started < 10  # a hang detector, not a benchmark
    block = HEAD + "".join("  " * i + f"k{i}:\n" for i in range(100)) + "  " * 100 + "v: 1\n"
    assert "nested deeper than 64 levels" in only_problem(block)


def test_too_many_values_without_aliases() -> None:
    text = HEAD + "x: [" + ",".join(["1"] * 120_000) + "]\n"
    assert "more than 100,000 values in one document" in only_problem(text)


def test_a_file_over_the_size_limit_is_not_read(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text(HEAD + "# " + "x" * (2 << 20) + "\n")
    [problem] = load_file(big).problems
    assert str(problem) == (f"{big}:1:1: (document): file too large: {big.stat().st_size:,} bytes, "
                            "the limit is 1,048,576 bytes (1 MiB); split it")


def test_binary_content_and_invalid_utf8_name_the_byte(tmp_path: Path) -> None:
    binary = tmp_path / "b.yaml"
    binary.write_bytes(HEAD.encode() + b"title: \x00\x01\x02\n")
    nul = len(HEAD) + 7
    assert str(load_file(binary).problems[0]).endswith(
        f"b.yaml:4:8: (document): binary content (a NUL byte at byte offset {nul}); expected UTF-8 text")
    latin = tmp_path / "l.yaml"
    latin.write_bytes(HEAD.encode() + "title: café\n".encode("latin-1"))
    bad = len(HEAD) + 10
    assert str(load_file(latin).problems[0]).endswith(
        f"l.yaml:4:11: (document): not UTF-8 text (invalid continuation byte at byte offset {bad})")


def test_more_steps_or_branches_than_a_runbook_may_have() -> None:
    steps = "".join(f"  s{i}:\n    title: {{en: S, zh: S}}\n    check: {{type: env}}\n    default: done\n"
                    for i in range(501))
    message = only_problem(HEAD + "start: s0\nsteps:\n" + steps)
    assert message == ("h.yaml:5:1: steps: 501 steps: at most 500 in one runbook (split it into "
                       "runbooks that hand over with `goto: other-runbook:step`)")
    branches = "".join("      - {when: 'true', goto: done}\n" for _ in range(MAX_BRANCHES + 1))
    text = HEAD + "start: s\nsteps:\n  s:\n    check: {type: env}\n    branches:\n" + branches
    assert only_problem(text).startswith("h.yaml:8:5: steps.s.branches: 101 branches: at most 100")


def test_other_yaml_readers_refuse_the_bomb_too() -> None:
    with pytest.raises(safeyaml.LimitError):
        safeyaml.load(billion_laughs())
    with pytest.raises(yaml.YAMLError):  # callers that only know YAMLError still catch it
        parse(billion_laughs())


def test_lint_of_the_bomb_stays_small_and_exits_2(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(billion_laughs())
    # The child reports its own peak: RUSAGE_CHILDREN here would hold the largest child this test
    # process (an xdist worker) ever waited for, such as a browser.
    code = ("import atexit, resource, sys; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30)); "
            "atexit.register(lambda: print('maxrss_kb', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "
            "file=sys.stderr)); "
            "from runbook.cli import main; sys.exit(main(['lint', sys.argv[1]]))")
    done = subprocess.run([sys.executable, "-c", code, str(bomb)], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stdout.startswith(f"{bomb}:9:10: (document): more than 100,000 values")
    label, peak_kb = done.stderr.split()[-2:]
    assert label == "maxrss_kb" and int(peak_kb) < 1 << 20  # KiB: under 1 GiB
