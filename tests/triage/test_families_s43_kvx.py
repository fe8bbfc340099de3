"""Message families of session 43's kv-transfer runbook: disaggregated serving's KV-cache transfer between
prefill and decode instances. UCX without its CUDA transports and NIXL's backend that cannot be created,
a peer the transfer engine cannot reach or a connection that drops (NIXL over UCX, Mooncake's RDMA, TCP and
handshake), instances whose transfer engines or configurations do not match (vLLM's NIXL compatibility
hash, Mooncake's segment descriptor), a missing control plane (NATS without JetStream, Mooncake's metadata
server), and SGLang's own words for a failed transfer. Two or more messages of each family read to their
conclusion, and near misses in similar words that must read otherwise. The wordings are the libraries' own
(the source file is named beside each family)."""

from __future__ import annotations

import pytest

from tests.triage.families import assert_first, assert_near_miss

# (family, text, conclusion, role of the first match)
CASES = [
    # openucx/ucx src/ucp/core/ucp_context.c ucp_report_unavailable: `transport%s %s %s not available, please
    # use one or more of: %s`, the CUDA transports missing from this UCX (LMCache/LMCache#605)
    ("ucx-no-cuda",
     "[1751000000.123456] [gpu-node-3:4410 :0]     ucp_context.c:1508 UCX  WARN  transport "
     "'cuda_copy' is not "
     "available, please use one or more of: cma, posix, rc_mlx5, self, sysv, tcp, ud_mlx5",
     "kv-transfer:no-gpu-transport", "cause"),
    ("ucx-no-cuda",
     "[1746690477.974497] [llm206:611  :0]     ucp_context.c:1268 UCX  WARN  transports "
     "'cuda_ipc','cuda_copy' "
     "are not available, please use one or more of: mm, posix, self, shm, sm, sysv, tcp\n"
     "Backend UCX was instantiated\n"
     "Initialized NIXL agent: NixlRole.SENDER",
     "kv-transfer:no-gpu-transport", "cause"),
    ("ucx-no-cuda",
     "[1751000100.000001] [pd-decode-0:88 :0]     ucp_context.c:1508 UCX  WARN  transports "
     "'rc','gdr_copy' are "
     "not available, please use one or more of: posix, self, sysv, tcp",
     "kv-transfer:no-gpu-transport", "cause"),
    # ai-dynamo/nixl src/core/nixl_agent.cpp createBackend (NIXL_ERROR_FUNC), src/plugins/ucx/ucx_utils.cpp
    ("nixl-backend-not-created",
     "E0813 10:02:11.331245  2211 nixl_agent.cpp:365] createBackend: backend creation failed for 'UCX'",
     "kv-transfer:no-gpu-transport", "cause"),
    ("nixl-backend-not-created",
     "E0813 10:02:11.331245  2211 nixl_agent.cpp:370] createBackend: backend initialization error "
     "for 'LIBFABRIC'",
     "kv-transfer:no-gpu-transport", "cause"),
    ("nixl-backend-not-created",
     "E0813 10:02:11.331000  2211 ucx_backend.cpp:983] Failed to create UCX context agent0: No such device",
     "kv-transfer:no-gpu-transport", "cause"),
    # src/utils/libfabric/libfabric_rail.cpp and src/plugins/libfabric/libfabric_backend.cpp: no provider
    ("nixl-libfabric-provider",
     "E1002 07:11:42.000120  5120 libfabric_rail.cpp:458] fi_getinfo failed for rail 0: No data available",
     "kv-transfer:no-gpu-transport", "cause"),
    ("nixl-libfabric-provider",
     "E1002 07:11:42.000300  5120 libfabric_backend.cpp:599] Failed to initialize libfabric backend: "
     "fi_getinfo failed for rail 0",
     "kv-transfer:no-gpu-transport", "cause"),
    # NIXL's UCX backend: `Unexpected UCX error: %s` (src/utils/ucx/ucx_utils.cpp in 2025,
    # LMCache/LMCache#725;
    # src/plugins/ucx/ucx_enums.cpp now), with UCX's status strings (src/ucs/type/status.c)
    ("nixl-ucx-endpoint",
     "[1749803291.555759] [vllm-lmcache-0:7053 :0]          tcp_ep.c:1260 UCX  ERROR tcp_ep 0x3c502370 "
     "(state=CONNECTED): send(110) failed: Input/output error\n"
     "W0613 08:28:11.555796    7053 ucx_utils.cpp:43] Unexpected UCX error: Endpoint timeout",
     "kv-transfer:peer-link-lost", "cause"),
    ("nixl-ucx-endpoint",
     "W0920 11:02:33.100200  9001 ucx_enums.cpp:58] Unexpected UCX error: Connection reset by remote peer",
     "kv-transfer:peer-link-lost", "cause"),
    # src/plugins/ucx/ucx_utils.cpp sendAmCallback, and NIXL's status in Python (vllm-project/vllm#49238)
    ("nixl-remote-disconnect",
     "E0801 12:00:01.000100  4410 ucx_utils.cpp:212] UCX AM send failed with status -80 (Endpoint timeout)\n"
     "nixl._bindings.nixlRemoteDisconnectError: NIXL_ERR_REMOTE_DISCONNECT",
     "kv-transfer:peer-link-lost", "cause"),
    ("nixl-remote-disconnect",
     "(EngineCore_DP0 pid=3312) ERROR 08-19 10:14:02 [base_worker.py:2210] NIXL transfer failed: "
     "nixlRemoteDisconnectError: NIXL_ERR_REMOTE_DISCONNECT",
     "kv-transfer:peer-link-lost", "cause"),
    # kvcache-ai/Mooncake worker_pool.cpp and docs/source/troubleshooting/troubleshooting.md
    ("mooncake-connect",
     "E0523 06:50:40.052094   223 worker_pool.cpp:242] Worker: Cannot make connection for endpoint: "
     "10.32.5.183:12728@mlx5_bond_0, mark it inactive",
     "kv-transfer:peer-link-lost", "cause"),
    ("mooncake-connect",
     "E0523 06:50:40.051000   223 rdma_endpoint.cpp:160] Failed to exchange handshake description",
     "kv-transfer:peer-link-lost", "cause"),
    # src/transfer_metadata_plugin.cpp (PLOG: `: strerror [errno]`),
    # src/transport/tcp_transport/tcp_transport.cpp
    ("mooncake-handshake",
     "E0610 09:12:44.000321  4101 transfer_metadata_plugin.cpp:984] SocketHandShakePlugin: connect()"
     "10.0.0.2:15428: Connection refused [111]",
     "kv-transfer:peer-link-lost", "cause"),
    ("mooncake-handshake",
     "E0610 09:12:44.000321  4101 tcp_transport.cpp:720] TcpTransport::getConnection failed to create "
     "connection to 10.0.0.7:16708. Error: connect: Cannot assign requested address",
     "kv-transfer:peer-link-lost", "cause"),
    # worker_pool.cpp: a work request completed with the verbs error of a lost link (ibv_wc_status_str)
    ("mooncake-wc-error",
     "E0611 03:01:02.123456  4102 worker_pool.cpp:654] Worker: Process failed for slice (opcode: 1, "
     "source_addr: 0x7f1c2a000000, length: 65536, dest_addr: 0x7f3cf6020000, local_nic: mlx5_0, peer_nic: "
     "10.0.0.2:15428@mlx5_0, dest_rkey: 2097408, retry_cnt: 0, max_retry_cnt: 8): transport retry counter "
     "exceeded",
     "kv-transfer:peer-link-lost", "cause"),
    ("mooncake-wc-error",
     "E0611 03:01:02.123999  4102 worker_pool.cpp:654] Worker: Process failed for slice (opcode: 1, "
     "source_addr: 0x7f1c2a010000, length: 65536, dest_addr: 0x7f3cf6030000, local_nic: mlx5_1, peer_nic: "
     "10.0.0.2:15428@mlx5_1, dest_rkey: 2097409, retry_cnt: 1, max_retry_cnt: 8): Work Request Flushed Error",
     "kv-transfer:peer-link-lost", "cause"),
    # mooncake-integration/transfer_engine/transfer_engine_py.cpp
    ("mooncake-transfer-timeout",
     "I0701 16:00:31.400112  8801 transfer_engine_py.cpp:533] Sync data transfer timeout after "
     "30000412345ns, "
     "local buffer 0x7f00a0000000 remote buffer 0x7f3cf6020000 length 65536",
     "kv-transfer:peer-link-lost", "cause"),
    ("mooncake-transfer-timeout",
     "I0701 16:00:31.400112  8801 transfer_engine_py.cpp:634] Sync batch data transfer timeout after "
     "60000000123ns",
     "kv-transfer:peer-link-lost", "cause"),
    # vllm-project/vllm vllm/distributed/kv_transfer/kv_connector/v1/nixl/base_worker.py _nixl_handshake
    ("vllm-nixl-compat",
     "RuntimeError: NIXL compatibility hash mismatch. Local: 3fc700da91, Remote: 161228f0aa. "
     "Prefill and decode "
     "instances have incompatible configurations. This may be due to: different vLLM versions, "
     "models, dtypes, "
     "KV cache layouts, attention backends, etc. Both instances must use identical configurations.",
     "kv-transfer:engine-config-mismatch", "cause"),
    ("vllm-nixl-compat",
     "RuntimeError: Failed to decode NixlHandshakePayload. This likely indicates an incompatibility between "
     "connector version. Error: Expected `array`, got `map`",
     "kv-transfer:engine-config-mismatch", "cause"),
    # kvcache-ai/Mooncake worker_pool.cpp -> transfer_metadata_dump.cpp (Mooncake#2177, SGLang's failure
    # after it)
    ("mooncake-segment-desc",
     "E0521 16:22:21.694042   162 transfer_metadata.cpp:877] Local segment descriptor not found\n"
     "I0521 16:41:10.810740  4097 transfer_metadata_dump.cpp:51] Failed to get segment descriptor "
     "for segment "
     "10.112.116.43:16917 address 0x715448048300--0x71544804a400\n"
     "[2026-05-21 16:41:11 TP7] Prefill transfer failed for request rank=7 req.rid='2026' "
     "req.bootstrap_room=66 with exception KVTransferError(bootstrap_room=66): Decode instance "
     "could be dead, "
     "remote mooncake session 10.112.116.43:16917 is not alive",
     "kv-transfer:engine-config-mismatch", "cause"),
    ("mooncake-segment-desc",
     "E20260420 08:25:14.973784 transfer_metadata_dump.cpp:51] Failed to get segment descriptor for segment "
     "10.1.2.3:17001 address 0x7f0c9bfff500--0x7f0c9c007500",
     "kv-transfer:engine-config-mismatch", "cause"),
    # nats-io/nats.py nats/js/manager.py and errors.py (ai-dynamo/dynamo#429), the server's JSNotEnabledErr
    ("nats-no-jetstream",
     "  File \"/opt/dynamo/venv/lib/python3.12/site-packages/nats/js/manager.py\", line 417, in "
     "_api_request\n"
     "    raise ServiceUnavailableError\n"
     "nats.js.errors.ServiceUnavailableError: nats: ServiceUnavailableError: code=None err_code=None "
     "description='None'",
     "kv-transfer:control-plane-missing", "cause"),
    ("nats-no-jetstream",
     "nats.js.errors.ServiceUnavailableError: nats: ServiceUnavailableError: code=503 err_code=10076 "
     "description='JetStream not enabled'",
     "kv-transfer:control-plane-missing", "cause"),
    ("nats-no-jetstream",
     "Error: failed to create stream: nats: jetstream not enabled",
     "kv-transfer:control-plane-missing", "cause"),
    # kvcache-ai/Mooncake src/transfer_metadata_plugin.cpp (etcd, HTTP metadata server)
    ("mooncake-metadata-server",
     "E0414 03:55:10.120001 77969 transfer_metadata_plugin.cpp:455] EtcdStoragePlugin: unable to connect "
     "10.6.131.5:2379: context deadline exceeded",
     "kv-transfer:control-plane-missing", "cause"),
    ("mooncake-metadata-server",
     "E1126 03:38:24.400001 149715 transfer_metadata_plugin.cpp:284] GET http://10.0.0.5:8080/metadata?"
     "key=mooncake%2Fram%2F10.0.0.6%3A12345 curl: Couldn't connect to server err: Failed to connect to "
     "10.0.0.5 port 8080 after 0 ms: Connection refused",
     "kv-transfer:control-plane-missing", "cause"),
    # sgl-project/sglang python/sglang/srt/disaggregation/mooncake/conn.py: the engine's words for any failed
    # transfer, its cause elsewhere
    ("sglang-transfer-failed",
     "[2026-02-27 15:01:51 TP4] Prefill transfer failed for request rank=4 "
     "req.rid='ca271fb6eab2421f98ac61976e6f0f34' req.bootstrap_room=6593551520068383758 with exception "
     "KVTransferError(bootstrap_room=6593551520068383758): Decode instance could be dead, remote mooncake "
     "session 10.99.91.49:15295 is not alive",
     "kv-transfer:transfer-failed-unexplained", "cause"),
    ("sglang-transfer-failed",
     "[2026-02-27 15:01:51 TP3] Decode transfer failed for request rank=3 "
     "decode_req.req.rid='63b1b22dad53465b92560ebdda56d075' "
     "decode_req.req.bootstrap_room=6593551520068383758 "
     "with exception KVTransferError(bootstrap_room=6593551520068383758): Failed to get kvcache from prefill "
     "instance, it might be dead",
     "kv-transfer:transfer-failed-unexplained", "cause"),
    ("sglang-transfer-failed",
     "[2026-09-14 10:00:00 TP0] Prefill bootstrap failed for request rank=0 req.rid='a1' "
     "req.bootstrap_room=4242 with exception KVTransferError(bootstrap_room=4242): Request 4242 timed out "
     "after 600.0s in KVPoll.Bootstrapping",
     "kv-transfer:transfer-failed-unexplained", "cause"),
]


@pytest.mark.parametrize(("family", "text", "conclusion", "role"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_message_reads_to_its_conclusion(family: str, text: str, conclusion: str, role: str) -> None:
    assert_first(text, family, conclusion, role)


# (family, text, the conclusion that must not come first, the one that must, or None)
NEAR_MISSES = [
    # a healthy NIXL start
    ("ucx-no-cuda",
     "(EngineCore_DP0 pid=594) 2025-11-25 02:39:46 NIXL INFO    _api.py:361 Backend UCX was instantiated\n"
     "(EngineCore_DP0 pid=594) 2025-11-25 02:39:46 NIXL INFO    _api.py:251 Initialized NIXL agent: 72fca207",
     "kv-transfer:no-gpu-transport", None),
    # UCX lacks a network transport, not a CUDA one
    ("ucx-no-cuda",
     "[1751000000.123456] [gpu-node-3:4410 :0]     ucp_context.c:1508 UCX  WARN  transport 'rc_mlx5' is not "
     "available, please use one or more of: cuda_copy, cuda_ipc, posix, self, sysv, tcp",
     "kv-transfer:no-gpu-transport", None),
    # vLLM's compatibility check passing
    ("vllm-nixl-compat",
     "(EngineCore_DP0 pid=594) INFO 11-25 02:41:02 [base_worker.py:672] NIXL compatibility check passed "
     "(hash: 3fc700da91)",
     "kv-transfer:engine-config-mismatch", None),
    # a UCX status NIXL does not read as a lost peer
    ("nixl-ucx-endpoint",
     "W0613 08:28:11.555796    7053 ucx_utils.cpp:43] Unexpected UCX error: Input/output error",
     "kv-transfer:peer-link-lost", None),
    # NCCL's own IB completion error stays NCCL's
    ("mooncake-wc-error",
     "gpu-node-1:1200:1250 [0] NCCL INFO transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion "
     "from peer "
     "10.0.0.2<43262> with status=12 opcode=0 len=0 vendor err 129 (Send) localGid fe80::1 remoteGids "
     "fe80::2 hca mlx5_0",
     "kv-transfer:peer-link-lost", None),
    # Mooncake answering a peer without its local segment yet: not by itself a mismatch
    ("mooncake-segment-desc",
     "E0521 16:22:21.694042   162 transfer_metadata.cpp:877] Local segment descriptor not found",
     "kv-transfer:engine-config-mismatch", None),
    # core NATS's no responders (any request nobody serves) is not JetStream's absence
    ("nats-no-jetstream",
     "nats.errors.NoRespondersError: nats: no responders available for request",
     "kv-transfer:control-plane-missing", None),
]


@pytest.mark.parametrize(("family", "text", "not_first", "first"), NEAR_MISSES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_reads_otherwise(family: str, text: str, not_first: str, first: str | None) -> None:
    assert_near_miss(text, family, not_first, first)
