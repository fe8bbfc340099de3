"""`python`: real snippets in real interpreter subprocesses."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from runbook.checks.general import python_snippet


def run(code: str, make_ctx, timeout: float = 10.0, **params: object) -> dict:
    return python_snippet.run({"code": code, **params}, make_ctx(timeout))


def test_result_dict_made_json_safe(make_ctx) -> None:
    code = (
        "import os, pathlib\n"
        "result = {'pid': os.getpid(), 'ranks': (0, 1), 'where': pathlib.Path('/tmp'),\n"
        "          'loss': float('nan'), 7: 'int key', 'nested': {'ok': True, 'none': None}}\n"
    )
    result = run(code, make_ctx)
    assert result["ok"] is True and result["error"] is None and result["traceback"] is None
    value = result["value"]
    assert value["pid"] != os.getpid()  # it ran in a subprocess
    assert value["ranks"] == [0, 1] and value["where"] == "/tmp" and value["loss"] == "nan"
    assert value["7"] == "int key" and value["nested"] == {"ok": True, "none": None}
    assert result["exit_code"] == 0 and result["timed_out"] is False
    assert result["available"] is True and result["reason"] is None


def test_check_function_gets_pid(make_ctx) -> None:
    code = "import sys\ndef check():\n    return {'pid': PID, 'argv0': sys.argv[0]}\n"
    result = run(code, make_ctx, pid=4242)
    assert result["ok"] is True and result["value"]["pid"] == 4242
    assert run(code, make_ctx, pid="")["value"]["pid"] is None


def test_snippet_raising(make_ctx) -> None:
    code = "steps = {'done': 3}\nresult = {'rate': steps['done'] / 0}\n"
    result = run(code, make_ctx)
    assert result["ok"] is False and result["value"] is None
    assert result["error"] == "ZeroDivisionError: division by zero"
    assert 'File "<snippet>", line 2' in result["traceback"]


def test_hanging_snippet_is_killed(tmp_path: Path, make_ctx) -> None:
    marker = tmp_path / "pid"
    code = (f"import os, subprocess, time\nopen({str(marker)!r}, 'w').write(str(os.getpid()))\n"
            "subprocess.Popen(['sleep', '60'])\ntime.sleep(60)\nresult = {}\n")
    start = time.monotonic()
    result = run(code, make_ctx, timeout=2.0)
    assert time.monotonic() - start < 3.5
    assert result["timed_out"] is True and result["ok"] is False and result["exit_code"] is None
    assert result["error"].startswith("the snippet did not finish within ")
    pid = int(marker.read_text())
    stat = Path(f"/proc/{pid}/stat")
    assert not stat.exists() or stat.read_text().rpartition(")")[2].split()[0] == "Z"
    leftovers = subprocess.run(["pgrep", "-f", "^sleep 60$", "-P", str(pid)], capture_output=True)
    assert leftovers.stdout == b""


def test_printing_does_not_confuse_the_answer(make_ctx) -> None:
    code = (
        "import sys\n"
        "for i in range(3000):\n"
        "    print('loading shard', i)\n"
        "print('{\"ok\": true, \"value\": {\"fake\": 1}}')\n"
        "print('warning: something', file=sys.stderr)\n"
        "result = {'real': 2}\n"
    )
    result = run(code, make_ctx)
    assert result["ok"] is True and result["value"] == {"real": 2}
    assert result["stdout_tail"].endswith('{"ok": true, "value": {"fake": 1}}\n')
    assert len(result["stdout_tail"]) == 2000
    assert result["stderr_tail"] == "warning: something\n"


@pytest.mark.parametrize(("code", "error"), [
    ("x = 1\n", "NameError: the snippet defines neither `result` nor `check()`"),
    ("result = [1, 2]\n", "TypeError: result is a list, not a dict"),
    ("import sys\nsys.exit(0)\n", "SystemExit: 0"),
    ("def check(:\n", "SyntaxError: "),  # the wording differs between Python versions
])
def test_bad_snippets(code: str, error: str, make_ctx) -> None:
    result = run(code, make_ctx)
    assert result["ok"] is False and result["value"] is None
    assert result["error"].startswith(error)


def test_interpreter_exiting_early(make_ctx) -> None:
    result = run("import os, sys\nsys.stderr.write('bye\\n')\nos._exit(3)\n", make_ctx)
    assert result["ok"] is False and result["exit_code"] == 3
    assert result["error"].endswith("exited with code 3 before answering: bye")


def test_missing_interpreter(tmp_path: Path, make_ctx) -> None:
    missing = str(tmp_path / "venv" / "bin" / "python")
    result = run("result = {}\n", make_ctx, python=missing)
    assert result["available"] is False and result["ok"] is False
    assert result["reason"].startswith(f"cannot run {missing}: ")
    assert result["python"] == missing


def _python38() -> str | None:
    found = glob.glob(os.path.expanduser("~/.pyenv/versions/3.8*/bin/python3.8"))
    for candidate in [shutil.which("python3.8"), *found]:
        if candidate and subprocess.run([candidate, "-c", "pass"], capture_output=True,
                                        timeout=20).returncode == 0:
            return candidate
    return None


PYTHON38 = _python38()


@pytest.mark.skipif(PYTHON38 is None, reason="no Python 3.8 on this machine")
def test_another_interpreter(make_ctx) -> None:
    python = PYTHON38
    result = run("import sys\nresult = {'version': sys.version_info[:2]}\n", make_ctx,
                 python=python)
    assert result["ok"] is True and result["value"] == {"version": [3, 8]}
    assert result["python"] == python
