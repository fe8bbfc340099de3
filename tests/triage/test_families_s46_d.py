"""Message families of session 46 (gpu-hardware, kv-transfer): the driver's Xid 13, 31 and 43, the faults
NVIDIA's Xid catalog counts as the application's (a graphics engine exception, an MMU fault, a faulting
context stopped; `NVRM: Xid (PCI:...): 31, pid=..., name=..., Ch ...`), and an Xid 45 the driver says one of
them caused; vLLM's NIXL handshake assertions when the two instances' KV layouts differ
(kv_connector/utils.py `Local block size %d is not divisible by remote block size %d or vice versa.`,
nixl_connector.py `Remote P worker KV layer cache must be of shape ...`, `Remote P worker with different
page/block size is not supported`), and NIXL's libfabric backend that cannot find this side's rails in
the peer's connection info (libfabric_rail_manager.cpp `Key %s not found or has invalid length: %d`,
`Failed to deserialize data rail endpoints with prefix: %s`). Two messages of each family read to their
conclusion, and near misses in similar words that must read otherwise."""

from __future__ import annotations

import pytest

from tests.triage.families import assert_first, assert_near_miss

# (family, text, conclusion)
CASES = [
    ("xid-application",
     "[Tue Apr  8 03:12:45 2025] NVRM: Xid (PCI:0000:3b:00): 31, pid=20871, name=python3, Ch 00000008, "
     "intr 10000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_3 faulted @ 0x7f1c_4a200000. Fault is of "
     "type FAULT_PDE ACCESS_TYPE_VIRT_WRITE",
     "gpu-hardware:xid-application"),
    ("xid-application",
     "kernel: NVRM: Xid (PCI:0000:b1:00): 13, pid=4410, name=pt_main_thread, Graphics SM Warp Exception on "
     "(GPC 2, TPC 1, SM 0): Out Of Range Address\n"
     "kernel: NVRM: Xid (PCI:0000:b1:00): 13, pid=4410, name=pt_main_thread, Graphics Exception: ESR "
     "0x514730=0x201000e 0x514734=0x24 0x514728=0xc81eb60 0x51472c=0x1174",
     "gpu-hardware:xid-application"),
    ("xid-application",
     "NVRM: Xid (PCI:0000:18:00 GPU-I:02 GPU-CI:00): 43, pid=1022, name=vllm, Ch 00000010",
     "gpu-hardware:xid-application"),
    ("xid-application",
     "NVRM: Xid (PCI:0000:18:00): 45, pid=1022, name=python, Ch 00000010 caused by previous Xid 31",
     "gpu-hardware:xid-application"),
    ("kv-layout-mismatch",
     "(EngineCore_DP0 pid=812) ERROR 06-02 11:04:17 [nixl_connector.py:1210] Handshake with remote "
     "engine failed\n"
     "(EngineCore_DP0 pid=812) AssertionError: Local block size 32 is not divisible by remote block size "
     "64 or vice versa.",
     "kv-transfer:engine-config-mismatch"),
    ("kv-layout-mismatch",
     "  File \"/usr/local/lib/python3.12/dist-packages/vllm/distributed/kv_transfer/kv_connector/v1/"
     "nixl_connector.py\", line 1402, in add_remote_agent\n"
     "    assert remote_block_len == self.block_len_per_layer[0] * tp_ratio, (\n"
     "AssertionError: Remote P worker KV layer cache must be of shape [2, N, local_kv_heads*tp_ratio, "
     "page_size, head_dim] and same dtype.",
     "kv-transfer:engine-config-mismatch"),
    ("kv-layout-mismatch",
     "AssertionError: Remote P worker with different page/block size is not supported "
     "self.block_size=16, remote_block_size=128",
     "kv-transfer:engine-config-mismatch"),
    ("nixl-rail-endpoints",
     "E0115 08:41:07.551203 30211 libfabric_rail_manager.cpp:1012] Key agent_data_ep_2 not found or has "
     "invalid length: -1\n"
     "E0115 08:41:07.551240 30211 libfabric_rail_manager.cpp:968] Failed to deserialize data rail endpoints "
     "with prefix: agent_data_ep_",
     "kv-transfer:engine-config-mismatch"),
    ("nixl-rail-endpoints",
     "[2025-11-20 14:02:33.118] [error] Failed to deserialize control rail endpoints with prefix: "
     "peer0_control_ep_\n"
     "[2025-11-20 14:02:33.118] [error] loadRemoteConnInfo failed: NIXL_ERR_BACKEND",
     "kv-transfer:engine-config-mismatch"),
]


@pytest.mark.parametrize(("family", "text", "conclusion"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_family_reads_to_its_conclusion(family: str, text: str, conclusion: str) -> None:
    assert_first(text, family, conclusion)


# (family, text, what must not come first, what must come first or None)
NEAR_MISSES = [
    # a contained ECC error is the memory's, not the program's
    ("xid-application",
     "NVRM: Xid (PCI:0000:3b:00): 94, pid=20871, name=python3, Contained: CE User Channel (0x9). "
     "RST: No, D-RST: No",
     "gpu-hardware:xid-application", None),
    # an Xid whose number only starts with 13 or 31 is another kind
    ("xid-application",
     "NVRM: Xid (PCI:0000:3b:00): 137, pid=20871, name=python3, NVLink: fatal error detected",
     "gpu-hardware:xid-application", None),
    # a block size that does not divide the model's on one instance is not two instances disagreeing
    ("kv-layout-mismatch",
     "ValueError: block_size (24) must be divisible by 16 for this attention backend",
     "kv-transfer:engine-config-mismatch", None),
    # the rail endpoints read back fine
    ("nixl-rail-endpoints",
     "I0115 08:41:07.551203 30211 libfabric_rail_manager.cpp:1020] Successfully deserialized 4 rail "
     "endpoints",
     "kv-transfer:engine-config-mismatch", None),
]


@pytest.mark.parametrize(("family", "text", "not_first", "first"), NEAR_MISSES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_reads_otherwise(family: str, text: str, not_first: str, first: str | None) -> None:
    assert_near_miss(text, family, not_first, first)
