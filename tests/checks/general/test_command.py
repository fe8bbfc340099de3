"""`command`: exit codes, output kept from its end (8000 characters unless max_chars), hangs."""

from __future__ import annotations

from runbook.checks.general import command

# 100,000 numbered lines (588,895 characters): longer than what run_command keeps by default.
LONG = "seq 1 100000"


def test_exit_code_output_and_match(make_ctx) -> None:
    result = command.run({"run": "echo hello; echo oops >&2; exit 3", "match": "^hel"}, make_ctx())
    assert result == {"exit_code": 3, "ok": False, "stdout": "hello\n", "stderr": "oops\n",
                      "timed_out": False, "not_found": False, "matched": True,
                      "stdout_bytes": 6, "stderr_bytes": 5, "truncated": False}


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


def test_a_command_that_prints_a_gigabyte_costs_little_and_says_so(make_ctx) -> None:
    # 1 GB to stdout: read whole (its size is recorded, its end kept), held in 256 kB.
    run = "head -c 1000000000 /dev/zero | tr '\\0' x; echo; echo THE-END"
    result = command.run({"run": run, "max_chars": 20}, make_ctx(timeout=60))
    assert result["exit_code"] == 0 and result["timed_out"] is False
    assert result["stdout_bytes"] == 1_000_000_009 and result["truncated"] is True
    assert result["stdout"] == "xxxxxxxxxxx\nTHE-END\n"


def test_truncation_is_marked_where_the_middle_was_dropped(make_ctx) -> None:
    outcome = make_ctx(timeout=10).run_command(["seq", "1", "100000"], max_output=1000)
    head, rest = outcome.stdout.split("\n[runbook: output truncated: ", 1)
    assert head.startswith("1\n2\n3\n") and len(head) == 500  # the first half of what is kept
    assert rest.startswith("588,895 bytes in all, 588,895 in the middle not kept]"[:22])
    assert "588,895 bytes in all, 587,895 in the middle not kept]\n" in rest
    assert rest.endswith("99999\n100000\n") and outcome.stdout_bytes == 588_895 and outcome.truncated

