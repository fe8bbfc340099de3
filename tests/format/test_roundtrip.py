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
