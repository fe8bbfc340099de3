"""Signatures written for a family of messages, not one string: each case is a verbatim line from a
public thread (the corpus entry that holds it is named), and a sibling line of the same family."""

from __future__ import annotations

import pytest

from runbook.library.runbooks import load_library
from runbook.triage.scan import triage

LIBRARY = load_library()

CASES = [
    # trl/596 (huggingface/trl#596): the launcher's --local_rank refused by HF's parser
    ("ValueError: Some specified arguments are not used by the HfArgumentParser: ['--local_rank=0']",
     "cli-args:local-rank-arg"),
    # pytorch/tecogan-31: the same refused by argparse, with a hyphen
    ("main.py: error: unrecognized arguments: --local-rank=0", "cli-args:local-rank-arg"),
    # trl/onebitllms-10 (tiiuae/onebitllms#10): an option HF's parser does not know
    ("ValueError: Some specified arguments are not used by the HfArgumentParser: ['--torch_dtype', "
     "'bfloat16']", "cli-args:unknown-option"),
    # llamafactory/5155 (hiyouga/LlamaFactory#5155): full while safetensors serialises a checkpoint
    ('safetensors_rust.SafetensorError: Error while serializing: IoError(Os { code: 28, kind: '
     'StorageFull, message: "No space left on device" })', "host-faults:checkpoint-storage-full"),
    # full outside any save: any disk
    ("OSError: [Errno 28] No space left on device: '/tmp/ray/session_latest'", "host-faults:disk-full"),
    # xtuner/819 (InternLM/xtuner#819): a package's compiled module missing a symbol, cut mid-line
    ("ImportError: /opt/conda/lib/python3.9/site-packages/flash_attn_2_cuda.cpython-39-x86_64-linux-gnu.so: "
     "undefined symbol: ", "extension-errors:extension-abi-mismatch"),
    # colossalai/5890 (hpcaitech/ColossalAI#5890): TCPStore's reply out of protocol
    ("RuntimeError: Stop_waiting response is expected", "ddp-errors:rendezvous-incomplete"),
]


@pytest.mark.parametrize(("line", "expected"), CASES, ids=[c[1] + f"-{i}" for i, c in enumerate(CASES)])
def test_a_family_line_concludes_its_member(line: str, expected: str) -> None:
    first = triage([line], LIBRARY)[0]
    assert f"{first.runbook}:{first.conclusion}" == expected
