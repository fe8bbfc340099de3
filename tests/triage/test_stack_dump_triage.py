"""A pasted stack dump is triaged by where its threads wait, with the stack check's rules: the
DataLoader, the rendezvous, the torch extensions lock (py-spy and faulthandler formats alike)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runbook.library.kb import load_kb
from runbook.library.runbooks import load_library
from runbook.triage.ranking import RANKING
from runbook.triage.result import triage_text

ROOT = Path(__file__).resolve().parents[2]
SITE = "/usr/lib/python3/dist-packages"

DUMPS = {
    "py-spy, a main thread waiting for its batch": (
        f'Thread 0x7F3A2B1C0740 (idle): "MainThread"\n'
        f"    wait (threading.py:320)\n    get (queue.py:180)\n"
        f"    _try_get_data ({SITE}/torch/utils/data/dataloader.py:1133)\n"
        f"    _get_data ({SITE}/torch/utils/data/dataloader.py:1294)\n"
        f"    _next_data ({SITE}/torch/utils/data/dataloader.py:1319)\n"
        f"    train (train.py:88)\n",
        "training-hang:dataloader-worker-stuck"),
    "faulthandler, a rank creating the c10d store": (
        "Thread 0x00007f2c1a7fe740 (most recent call first):\n"
        f'  File "{SITE}/torch/distributed/rendezvous.py", line 189 in _create_c10d_store\n'
        f'  File "{SITE}/torch/distributed/rendezvous.py", line 258 in _env_rendezvous_handler\n'
        f'  File "{SITE}/torch/distributed/distributed_c10d.py", line 1520 in init_process_group\n'
        '  File "train.py", line 12 in main\n',
        "training-hang:waiting-in-rendezvous"),
    "py-spy, a rank waiting on the JIT build's lock": (
        'Thread 0x7F3A2B1C0740 (idle): "MainThread"\n'
        f"    wait ({SITE}/torch/utils/file_baton.py:43)\n"
        f"    _jit_compile ({SITE}/torch/utils/cpp_extension.py:1768)\n"
        f"    load ({SITE}/torch/utils/cpp_extension.py:1312)\n",
        "extension-errors:stale-extension-lock"),
}


@pytest.fixture(scope="module")
def library_and_kb():  # type: ignore[no-untyped-def]
    return load_library([ROOT / "runbooks"]), load_kb()


@pytest.mark.parametrize("name", sorted(DUMPS))
def test_a_dump_is_triaged_by_where_it_waits(library_and_kb, name: str) -> None:
    text, wanted = DUMPS[name]
    result = triage_text(*library_and_kb, text)
    first = result.matches[0]
    got = [f"{m.runbook}:{m.conclusion}" for m in result.matches]
    assert got[0] == wanted, got
    # a rank waiting on its peers (the rendezvous) is a consequence; the others name a cause
    assert first.role == ("knock-on" if wanted in RANKING["evidence"]["reading"]["knock_on"] else "cause")


def test_a_crash_traceback_through_the_dataloader_is_not_a_hang(library_and_kb) -> None:
    # A regular traceback (`line N, in f`, with the comma) passes through _next_data on a crash.
    text = ("Traceback (most recent call last):\n"
            f'  File "{SITE}/torch/utils/data/dataloader.py", line 1319, in _next_data\n'
            "    return self._process_data(data)\n"
            "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Killed.\n")
    result = triage_text(*library_and_kb, text)
    assert all(m.conclusion != "dataloader-worker-stuck" for m in result.matches[:1])
