"""Message families of session 46 (kv-transfer): vLLM's NIXL handshake assertions when the two
instances' KV layouts differ (kv_connector/utils.py `Local block size %d is not divisible by remote block
size %d or vice versa.`, nixl_connector.py `Remote P worker KV layer cache must be of shape ...`, `Remote P
worker with different page/block size is not supported`), and NIXL's libfabric backend that cannot find
this side's rails in the peer's connection info (libfabric_rail_manager.cpp `Key %s not found or has
invalid length: %d`, `Failed to deserialize data rail endpoints with prefix: %s`). Two messages of each
family read to their conclusion, and near misses in similar words that must read otherwise."""

from __future__ import annotations

import pytest

from tests.triage.families import assert_first, assert_near_miss

# (family, text, conclusion)
CASES = [
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
