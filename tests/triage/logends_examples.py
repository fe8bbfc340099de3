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
    # a run that says it finished: no stall to name
    "finished_run": """\
INFO:root:epoch 3 done
INFO:root:Saving the final checkpoint to /ckpt/final
INFO:root:Training completed in 3.2 hours
""",
}
