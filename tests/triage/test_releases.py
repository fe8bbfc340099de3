"""A release's confirmed bug read from the log alone (triage/readings/releases.py): the NCCL
version a log states and the bug's own lines, against the known_issues check's table."""

from __future__ import annotations

from pathlib import Path

from runbook.library.runbooks import load_library
from runbook.triage.readings import releases
from runbook.triage.result import triage_text

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = load_library([ROOT / "runbooks"])

# NCCL 2.18.1's P2P setup bug (nccl#957) as torch reports it: the version in torch's suffix
P2P_BUG = (
    "[rank1]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
    "ProcessGroupNCCL.cpp:1333, unhandled cuda error (run with NCCL_DEBUG=INFO for details), "
    "NCCL version {version}\n"
    "[rank1]: ncclUnhandledCudaError: Call to CUDA function failed.\n"
    "[rank1]: Last error:\n"
    "[rank1]: Cuda failure 'invalid argument'\n")

def _first(text: str) -> tuple[str, object]:
    result = triage_text(LIBRARY, None, text, "paste")
    first = result.matches[0]
    return f"{first.runbook}:{first.conclusion}", first


def test_an_affected_version_with_the_bugs_line_names_the_release_bug() -> None:
    key, match = _first(P2P_BUG.format(version="2.18.1"))
    assert key == releases.CONCLUSION and match.role == "cause"
    assert match.release["version"] == "2.18.1" and match.release["fixed_in"]
    assert "NCCL 2.18.1 has a confirmed bug" in match.why() and "nvidia/nccl/issues" in match.why().lower()
    assert "NCCL 2.18.1 有已确认的缺陷" in match.why("zh")
    assert match.to_json()["release"]["id"] == match.release["id"]


def test_the_same_error_under_a_fixed_release_stays_unexplained() -> None:
    key, match = _first(P2P_BUG.format(version="2.21.5"))
    assert key == "nccl-errors:nccl-error-unexplained" and match.release is None


def test_a_version_alone_or_the_line_alone_is_no_release_bug() -> None:
    banner = "gpu01:4242:4242 [0] NCCL INFO NCCL version 2.18.1+cuda12.1\nstep 10 loss 2.1\n"
    assert all(f"{m.runbook}:{m.conclusion}" != releases.CONCLUSION
               for m in triage_text(LIBRARY, None, banner, "paste").matches)
    no_version = P2P_BUG.format(version="").replace(", NCCL version ", "")
    assert _first(no_version)[0] == "nccl-errors:nccl-error-unexplained"


def test_the_version_from_an_nccl_banner_or_vllm_counts_too() -> None:
    for stated in ("gpu01:4242:4242 [0] NCCL INFO NCCL version 2.18.1+cuda12.1\n",
                   "INFO 03-28 21:38:20 pynccl.py:58] vLLM is using nccl==2.18.1\n"):
        text = stated + P2P_BUG.format(version="").replace(", NCCL version ", "")
        assert _first(text)[0] == releases.CONCLUSION, stated


def test_a_bug_whose_line_no_signature_explains_is_not_guessed() -> None:
    # the bug's own line must be in the excerpt: another NCCL failure under 2.18.1 is not it
    text = ("NCCL INFO NCCL version 2.18.1+cuda12.1\n"
            "misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.2<43021> failed : "
            "Software caused connection abort\n")
    assert all(f"{m.runbook}:{m.conclusion}" != releases.CONCLUSION
               for m in triage_text(LIBRARY, None, text, "paste").matches)


def test_every_row_of_the_table_names_a_version_and_lines() -> None:
    rows = releases.rows()
    assert rows and all(row.get("affected") and row.get("log_all") for row in rows)
