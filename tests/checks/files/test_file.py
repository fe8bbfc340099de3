"""`file` against real files and directories."""

from __future__ import annotations

import os
import time
from pathlib import Path

from runbook.checks.files import file


def touch(path: Path, size: int, age_s: float) -> Path:
    path.write_bytes(b"x" * size)
    when = time.time() - age_s
    os.utime(path, (when, when))
    return path


def test_glob_sizes_ages_and_empty(tmp_path: Path, make_ctx) -> None:
    touch(tmp_path / "step_100.pt", 100, age_s=3600)
    touch(tmp_path / "step_200.pt", 0, age_s=60)
    touch(tmp_path / "notes.txt", 5, age_s=1)
    result = file.run({"path": str(tmp_path / "*.pt")}, make_ctx())
    assert result["exists"] is True
    assert result["count"] == 2
    assert [f["path"] for f in result["files"]] == [str(tmp_path / "step_100.pt"),
                                                    str(tmp_path / "step_200.pt")]
    assert [f["size_bytes"] for f in result["files"]] == [100, 0]
    assert [f["is_dir"] for f in result["files"]] == [False, False]
    assert result["total_bytes"] == 100
    assert result["empty"] == 1
    assert 59 < result["newest_age_s"] < 65
    assert 3599 < result["oldest_age_s"] < 3605
    assert file.run({"path": str(tmp_path / "*.pt"), "min_size": 101}, make_ctx())["empty"] == 2
    assert file.run({"path": str(tmp_path / "*.pt"), "min_size": 0}, make_ctx())["empty"] == 0


def test_directory_and_plain_path(tmp_path: Path, make_ctx) -> None:
    (tmp_path / "ckpt").mkdir()
    result = file.run({"path": str(tmp_path / "ckpt")}, make_ctx())
    assert result["exists"] is True and result["count"] == 1
    assert result["files"][0]["is_dir"] is True
    assert result["total_bytes"] == 0 and result["empty"] == 0


def test_missing(tmp_path: Path, make_ctx) -> None:
    for path in (tmp_path / "nope", tmp_path / "*.nope"):
        result = file.run({"path": str(path)}, make_ctx())
        assert result == {"exists": False, "count": 0, "files": [], "total_bytes": 0, "empty": 0,
                          "newest_age_s": None, "oldest_age_s": None}


def test_list_is_capped_and_sorted(tmp_path: Path, make_ctx) -> None:
    for i in range(250):
        (tmp_path / f"f{i:03d}").write_bytes(b"ab")
    result = file.run({"path": str(tmp_path / "f*")}, make_ctx())
    assert result["count"] == 250
    assert len(result["files"]) == 200
    assert result["files"][0]["path"] == str(tmp_path / "f000")
    assert result["files"][-1]["path"] == str(tmp_path / "f199")
    assert result["total_bytes"] == 500


def test_dangling_symlink_exists_as_path(tmp_path: Path, make_ctx) -> None:
    (tmp_path / "latest").symlink_to(tmp_path / "gone")
    result = file.run({"path": str(tmp_path / "latest")}, make_ctx())
    assert result["exists"] is True and result["count"] == 1
    assert result["total_bytes"] == 0 and result["empty"] == 0
