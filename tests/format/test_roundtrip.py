"""Round-trip YAML edits keep the file as its author wrote it (shared by migrate and i18n stamp)."""

from __future__ import annotations

import pytest

from runbook.format import roundtrip

FOUR_SPACES = """# a comment that must stay
id: demo     # and one at the end of a line
params:
    log: {type: path, default: null}
steps:
    first:
        branches:
          - when: result.found
            goto: done
        note: 'single quotes stay'
"""


def test_an_untouched_document_is_written_back_line_for_line() -> None:
    data, yaml, relaid = roundtrip.load(FOUR_SPACES)
    assert relaid == 0
    assert roundtrip.dump(yaml, data) == FOUR_SPACES


def test_an_edit_changes_only_what_it_edits() -> None:
    data, yaml, _ = roundtrip.load(FOUR_SPACES)
    data["steps"]["first"]["note"] = "changed"
    out = roundtrip.dump(yaml, data)
    assert out == FOUR_SPACES.replace("'single quotes stay'", "'changed'")


def test_bad_yaml_is_one_error_with_its_place() -> None:
    with pytest.raises(roundtrip.RoundTripError) as caught:
        roundtrip.load("id: demo\nsteps: [unclosed\n")
    assert caught.value.line == 3 and caught.value.message.startswith("YAML syntax error:")


def test_an_alias_bomb_is_refused_before_ruamel_builds_it() -> None:
    # `runbook migrate` and `runbook i18n stamp` edit files with ruamel, which expands aliases too.
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    with pytest.raises(roundtrip.RoundTripError) as refused:
        roundtrip.load("\n".join(lines) + "\n")
    assert (refused.value.line, refused.value.column) == (6, 10)
    assert refused.value.message == "more than 100,000 values in one document once its aliases are expanded"
