"""Pastes that just stop (triage/readings/logends.py), shared by the CLI's tests and the site's parity test
(tests/site/test_triage_page.py). Lines follow the real tools' output."""

EXAMPLES = {
    # vLLM with tensor parallelism: NCCL's set-up lines, then nothing
    "nccl_info_then_silence": """\
INFO 05-02 10:11:12 utils.py:660] Found nccl from library libnccl.so.2
INFO 05-02 10:11:12 pynccl.py:63] vLLM is using nccl==2.20.5
gpu01:4242:4242 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>
gpu01:4242:4242 [0] NCCL INFO cudaDriverVersion 12040
gpu01:4242:4318 [0] NCCL INFO Channel 00/02 :    0   1
gpu01:4242:4318 [0] NCCL INFO Connected all rings
""",
    # an RL job (OpenRLHF's vLLM actors) that stops after its engines started
    "rl_job_then_silence": """\
(LLMRayActor pid=2211) INFO 04-09 01:52:46 [core.py:151] init engine took 47.83 seconds
[2025-04-09 01:53:02] Loaded the actor and the reference model
Collecting rollouts for step 1
""",
    # the same, where only Ray's prefix names the RL job's actor (the prefix is gone from the
    # normalised lines; OpenRLHF#918's shape)
    "rl_actor_prefix_then_silence": """\
(LLMRayActor pid=1209, ip=10.0.0.7) INFO 03-27 00:06:10 [loader.py:447] Loading weights took 279.51 seconds
(LLMRayActor pid=1209, ip=10.0.0.7) INFO 03-27 00:06:23 [backends.py:132] Cache the graph of shape None
(LLMRayActor pid=1211, ip=10.0.0.7) INFO 03-27 00:06:56 [backends.py:144] Compiling a graph for general shape
""",
    # nccl-tests on one node (two GPUs): the device list, the table's header, then nothing (its lines
    # cut at 110 characters)
    "nccl_tests_one_node_stops": """\
# nThread 1 nGpus 2 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 validation: 1
#
# Using devices
#  Rank  0 Group  0 Pid  90210 on      gpu07 device  0 [0x1b] NVIDIA RTX A6000
#  Rank  1 Group  0 Pid  90210 on      gpu07 device  1 [0x3d] NVIDIA RTX A6000
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw
""",
    # the same test across two nodes: the network is as likely as the PCIe path
    "nccl_tests_two_nodes_stop": """\
# Using devices
#  Rank  0 Group  0 Pid  4111 on gpu07 device  0 [0x1b] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid  5222 on gpu08 device  0 [0x1b] NVIDIA H100 80GB HBM3
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw
""",
    # ... and one node that printed rows of results before it stopped: it finished collectives
    "nccl_tests_rows_then_stop": """\
# Using devices
#  Rank  0 Group  0 Pid  90210 on gpu07 device  0 [0x1b] NVIDIA RTX A6000
#  Rank  1 Group  0 Pid  90210 on gpu07 device  1 [0x3d] NVIDIA RTX A6000
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw
           8             2     float     sum      -1    18.51    0.00    0.00      0    18.22    0.00
          16             4     float     sum      -1    18.47    0.00    0.00      0    18.30    0.00
""",
    # a run that says it finished: no stall to name
    "finished_run": """\
INFO:root:epoch 3 done
INFO:root:Saving the final checkpoint to /ckpt/final
INFO:root:Training completed in 3.2 hours
""",
    # torchrun's failure summary: the ranks exited with code 1 (their traceback is elsewhere), not a stall
    "torchrun_summary_exit_1": """\
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2024-03-02_10:11:12
  host      : gpu01
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 4242)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
""",
    # a Ray job that ended, with the raylet's error-severity lines before it
    "ray_job_failed_disk_monitor": """\
Job 'raysubmit_4bZ' failed
------------------------------------------
Status message: Job entrypoint command failed with exit code 1, last available logs:
(raylet) [2025-01-02 03:04:05,678 E 1111 2222] file_system_monitor.cc:116: /tmp/ray/session_x is over 95% full
""",
}
