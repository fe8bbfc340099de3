"""The `ray_tempdir` check: the socket path Ray's session would create under a temp dir, measured
against the 107-byte AF_UNIX limit (paths from verl#1120 and from Ray 2.60's own error)."""

from __future__ import annotations

import os

from runbook.checks.distributed import ray_tempdir

# verl-project/verl#1120: TMPDIR of a Slurm job on shared storage.
VERL_1120 = ("/net/tdfcarhc/people/poebhkiwa/slurm_jobdir/1355700/tmp.t0016/ray/"
             "session_2025-04-16_17-26-47_592207_2944448/sockets/plasma_store")


def test_a_printed_socket_path_is_measured_as_it_is(make_ctx) -> None:
    result = ray_tempdir.run({"socket_path": f"'{VERL_1120}'"}, make_ctx())
    assert result["source"] == "log" and result["socket_path"] == VERL_1120
    assert result["temp_dir"] == "/net/tdfcarhc/people/poebhkiwa/slurm_jobdir/1355700/tmp.t0016/ray"
    assert result["socket_path_bytes"] == len(VERL_1120) == 129
    assert result["too_long"] and result["over_by"] == 22 and result["limit"] == 107
    # the session part (session_<26>_<7 digits>/sockets/plasma_store) leaves 43 bytes for the dir
    assert result["max_temp_dir_bytes"] == 107 - (129 - result["temp_dir_bytes"]) == 43


def test_temp_dir_precedence_is_rays(make_ctx) -> None:
    assert ray_tempdir.ray_temp_dir("~/r", {}) == (os.path.expanduser("~/r"), "temp_dir")
    env = {"RAY_TMPDIR": "/a", "TMPDIR": "/b"}
    assert ray_tempdir.ray_temp_dir("", env) == ("/a/ray", "RAY_TMPDIR")
    assert ray_tempdir.ray_temp_dir("", {"TMPDIR": "/b"}) == ("/b/ray", "TMPDIR")
    assert ray_tempdir.ray_temp_dir("", {}) == ("/tmp/ray", "default")


def test_a_long_tmpdir_from_the_environment(make_ctx) -> None:
    tmpdir = "/scratch/alice/slurm_jobdir/48213377/tmp.node0042.0123456789"
    result = ray_tempdir.run({}, make_ctx(env={"TMPDIR": tmpdir}))
    assert result["source"] == "TMPDIR" and result["temp_dir"] == tmpdir + "/ray"
    assert result["socket_path"].startswith(tmpdir + "/ray/session_")
    assert result["socket_path"].endswith("/sockets/plasma_store")
    assert result["too_long"] and result["socket_path_bytes"] > 107
    short = ray_tempdir.run({"temp_dir": "/tmp/ray"}, make_ctx(env={"TMPDIR": tmpdir}))
    assert short["source"] == "temp_dir" and not short["too_long"] and short["over_by"] == 0
    assert short["max_temp_dir_bytes"] >= len("/tmp/ray")


def test_the_environment_of_a_process(make_ctx) -> None:
    mine = ray_tempdir.run({"pid": os.getpid()}, make_ctx(env={"TMPDIR": "/not/read"}))
    assert mine["env_of"] == f"pid {os.getpid()}"
    gone = ray_tempdir.run({"pid": "999999999"}, make_ctx(env={"TMPDIR": "/x"}))
    assert gone["env_of"] == "this probe" and gone["temp_dir"] == "/x/ray"
