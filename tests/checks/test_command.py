"""`command`: exit codes, output kept from its end (8000 characters unless max_chars), hangs."""

from __future__ import annotations

from runbook.checks import command

# 100,000 numbered lines (588,895 characters): longer than what run_command keeps by default.
LONG = "seq 1 100000"


def test_exit_code_output_and_match(make_ctx) -> None:
    result = command.run({"run": "echo hello; echo oops >&2; exit 3", "match": "^hel"}, make_ctx())
    assert result == {"exit_code": 3, "ok": False, "stdout": "hello\n", "stderr": "oops\n",
                      "timed_out": False, "not_found": False, "matched": True}


def test_by_default_the_last_8000_characters_are_kept(make_ctx) -> None:
    result = command.run({"run": "seq 1 2000"}, make_ctx())
    assert len(result["stdout"]) == 8000
    assert result["stdout"].endswith("1999\n2000\n")


def test_max_chars_keeps_the_true_end_of_a_long_output(make_ctx) -> None:
    result = command.run({"run": LONG, "max_chars": 1_000_000}, make_ctx(timeout=10))
    assert result["stdout"].startswith("1\n2\n3\n")
    assert result["stdout"].endswith("99999\n100000\n")
    tail = command.run({"run": LONG, "max_chars": 12}, make_ctx(timeout=10))
    assert tail["stdout"] == "99999\n100000\n"[-12:]


def test_max_chars_as_text_or_empty_is_read_like_a_template_gives_it(make_ctx) -> None:
    assert len(command.run({"run": "seq 1 2000", "max_chars": "10"}, make_ctx())["stdout"]) == 10
    assert len(command.run({"run": "seq 1 2000", "max_chars": ""}, make_ctx())["stdout"]) == 8000


def test_a_hanging_command_is_killed_at_the_deadline(make_ctx) -> None:
    result = command.run({"run": "sleep 30"}, make_ctx(timeout=1.0))
    assert result["timed_out"] is True and result["exit_code"] is None and result["ok"] is False


def test_a_missing_program_is_exit_127(make_ctx) -> None:
    result = command.run({"run": "no-such-program-here"}, make_ctx())
    assert result["exit_code"] == 127 and "not found" in result["stderr"]
