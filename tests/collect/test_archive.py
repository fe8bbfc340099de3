"""The bundle's archive is reproducible, and its index says what each section holds."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

from runbook.collect.archive import (
    COLLECTED,
    FIXED_MTIME,
    TIMEOUT,
    UNREACHABLE,
    NodeEntry,
    SectionEntry,
    archive_bytes,
    index_json,
    index_markdown,
    node_dir,
    write_archive,
)

MEMBERS = {"node02/log.txt": b"b\n", "INDEX.md": b"# x\n", "node01/log.txt": "日志\n".encode()}


def test_the_same_members_give_the_same_bytes_in_any_order() -> None:
    first = archive_bytes(MEMBERS)
    second = archive_bytes(dict(reversed(list(MEMBERS.items()))))
    assert first == second
    assert archive_bytes({**MEMBERS, "node01/log.txt": b"other\n"}) != first


def test_members_are_sorted_with_fixed_owner_time_and_mode() -> None:
    with tarfile.open(fileobj=io.BytesIO(archive_bytes(MEMBERS)), mode="r:gz") as tar:
        infos = tar.getmembers()
        assert [i.name for i in infos] == sorted(MEMBERS)
        assert {(i.mtime, i.uid, i.gid, i.uname, i.gname, i.mode) for i in infos} == \
            {(FIXED_MTIME, 0, 0, "", "", 0o644)}
        assert tar.extractfile("node01/log.txt").read() == "日志\n".encode()  # type: ignore[union-attr]


def test_the_gzip_header_has_no_time_or_name() -> None:
    data = archive_bytes(MEMBERS)
    assert data[4:8] == b"\0\0\0\0"  # MTIME
    assert data[3] & 0x08 == 0  # no FNAME


def test_write_archive_replaces_the_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "b.tar.gz"
    target.write_bytes(b"old")
    size = write_archive(target, MEMBERS)
    assert target.read_bytes() == archive_bytes(MEMBERS) and size == target.stat().st_size
    assert [p.name for p in tmp_path.iterdir()] == ["b.tar.gz"]


def test_node_dirs_are_safe_paths() -> None:
    assert node_dir("gpu001") == "gpu001"
    assert node_dir("root@10.0.0.1") == "root@10.0.0.1"
    assert node_dir("../../etc") == "_.._etc"
    assert node_dir("a b/c") == "a_b_c"


def test_the_index_lists_every_section_and_why_one_is_missing() -> None:
    nodes = [
        NodeEntry("n1", "partial", None, [
            SectionEntry("log", "n1/log.txt", COLLECTED, None, "log check", 10, 0.1),
            SectionEntry("nvidia-smi", "n1/nvidia-smi.txt", TIMEOUT, "nvidia-smi hung | killed", "cmd", 5)]),
        NodeEntry("n2", UNREACHABLE, "connection refused", [
            SectionEntry("log", "n2/log.txt", UNREACHABLE, "connection refused", "", 3)]),
    ]
    index = index_json(nodes, {"collected_at": "2026-01-01T00:00:00Z"})
    assert index["schema"] == "runbook-bundle/v1" and index["collected_at"] == "2026-01-01T00:00:00Z"
    assert index["summary"] == {"nodes": 2, "unreachable": ["n2"], "sections_collected": 1,
                                "sections_not_collected": 2, "exit_code": 3}
    assert index["nodes"][0]["sections"][1] == {
        "section": "nvidia-smi", "file": "n1/nvidia-smi.txt", "status": TIMEOUT,
        "reason": "nvidia-smi hung | killed", "source": "cmd", "size_bytes": 5, "duration_s": 0.0}
    json.dumps(index)
    text = index_markdown(nodes, ["header"])
    assert "## n1 — 1 of 2 sections collected" in text
    assert "| nvidia-smi | `n1/nvidia-smi.txt` | timeout | 5 | nvidia-smi hung \\| killed |" in text
    assert "## n2 — unreachable: connection refused" in text
