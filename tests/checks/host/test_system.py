"""`system` against this machine."""

from __future__ import annotations

import os
import platform
import shutil
import socket
import sys
from pathlib import Path

from runbook.checks.host import system


def test_this_machine(make_ctx) -> None:
    result = system.run({}, make_ctx())
    assert result["hostname"] == socket.gethostname()
    assert result["kernel"] == os.uname().release
    assert result["python"] == {"version": platform.python_version(),
                                "executable": sys.executable}
    assert result["cpu_count"] == os.cpu_count()
    assert len(result["load_avg"]) == 3 and all(x >= 0 for x in result["load_avg"])
    assert 0 < result["mem_available_mib"] <= result["mem_total_mib"]
    assert result["swap_used_mib"] >= 0
    assert result["uptime_s"] > 0
    assert set(result["disk"]) == {"/", "/tmp"}
    root = shutil.disk_usage("/")
    assert result["disk"]["/"]["total_gib"] == round(root.total / 1024**3, 2)
    assert 0 <= result["disk"]["/"]["used_percent"] <= 100
    if os.path.isdir("/dev/shm"):
        assert result["shm"]["total_mib"] == shutil.disk_usage("/dev/shm").total // 1024**2
    else:
        assert result["shm"] is None
    assert result["os"] == system.os_pretty_name()


def test_disk_paths_and_missing_path(tmp_path: Path, make_ctx) -> None:
    missing = str(tmp_path / "nope")
    result = system.run({"paths": [str(tmp_path), missing]}, make_ctx())
    assert list(result["disk"]) == [str(tmp_path), missing]
    assert result["disk"][missing] is None
    assert result["disk"][str(tmp_path)]["free_gib"] >= 0


def test_os_release_parsing(tmp_path: Path) -> None:
    release = tmp_path / "os-release"
    release.write_text('NAME="Ubuntu"\nPRETTY_NAME="Ubuntu 22.04.4 LTS"\nID=ubuntu\n')
    assert system.os_pretty_name(str(release)) == "Ubuntu 22.04.4 LTS"
    assert system.os_pretty_name(str(tmp_path / "absent")) is None
