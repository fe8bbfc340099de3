"""Message families of the launchers and parallel-config layers (torchrun's agent, DeepSpeed's launcher and
config, Megatron-LM, torchtitan, DeviceMesh, vLLM's parallel checks, FSDP, c10d's name lookup, Open MPI,
Slurm's refusals), written from the libraries' own source (the file is named beside each family): each
family read by its own words in two or more of its spellings, and a near miss in similar words that must
read otherwise."""

from __future__ import annotations

import pytest

from tests.triage.families import assert_first, assert_near_miss

# (family, text, conclusion, role of the first match)
CASES = [
    # megatron/core/parallel_state.py initialize_model_parallel (NeMo and Megatron-DeepSpeed carry the same
    # check), and the older megatron/arguments.py validate_args: the world size is no multiple of TP x PP
    # (x CP)
    ("parallel-sizes-vs-world",
     "[rank0]: RuntimeError: world_size (8) is not divisible by tensor_model_parallel_size (3) x "
     "pipeline_model_parallel_size (1) x context_parallel_size (1)",
     "ddp-errors:world-size-mismatch", "cause"),
    ("parallel-sizes-vs-world",
     "RuntimeError: world_size (4) is not divisible by tensor_model_parallel_size (8) x "
     "pipeline_model_parallel_size (1)",
     "ddp-errors:world-size-mismatch", "cause"),
    ("parallel-sizes-vs-world",
     "AssertionError: world size (6) is not divisible by tensor model parallel size (4)",
     "ddp-errors:world-size-mismatch", "cause"),
    # torchtitan's ParallelDims._validate and torch/distributed/device_mesh.py: the mesh does not fit the
    # world
    ("mesh-vs-world",
     "AssertionError: Invalid parallel dims: dp_replicate(1) * dp_shard(2) * cp(2) * tp(2) * pp(1) != "
     "WORLD_SIZE(4)",
     "ddp-errors:world-size-mismatch", "cause"),
    ("mesh-vs-world",
     "RuntimeError: Mesh should not be bigger than default world size 4, but found 8 ranks!",
     "ddp-errors:world-size-mismatch", "cause"),
    ("mesh-vs-world",
     "RuntimeError: Mesh should not be bigger than default world size, but found 6 ranks!",
     "ddp-errors:world-size-mismatch", "cause"),
    # vllm/config.py verify_with_parallel_config and megatron/core/transformer/transformer_config.py: the
    # tensor/pipeline size does not divide the model
    ("parallel-sizes-vs-model",
     "ValueError: Total number of attention heads (40) must be divisible by tensor parallel size (3).",
     "ddp-errors:world-size-mismatch", "cause"),
    ("parallel-sizes-vs-model",
     "ValueError: Total number of hidden layers (30) must be divisible by pipeline parallel size (4).",
     "ddp-errors:world-size-mismatch", "cause"),
    ("parallel-sizes-vs-model",
     "ValueError: num_query_groups (4) must be a multiple of tensor_model_parallel_size (8).",
     "ddp-errors:world-size-mismatch", "cause"),
    # Open MPI's rmaps help text (help-orte-rmaps-base.txt / prte): mpirun -np above the slots it was given
    ("mpirun-slots",
     "--------------------------------------------------------------------------\n"
     "There are not enough slots available in the system to satisfy the 8\n"
     "slots that were requested by the application:\n\n  python\n\n"
     "Either request fewer slots for your application, or make more slots\navailable for use.",
     "ddp-errors:world-size-mismatch", "cause"),
    ("mpirun-slots",
     "There are not enough slots available in the system to satisfy the 16 slots that were requested by the "
     "application:",
     "ddp-errors:world-size-mismatch", "cause"),
    # deepspeed/launcher/runner.py main(): --num_nodes above 1 with no hostfile to name the nodes
    ("ds-nodes-without-hostfile",
     "ValueError: Num nodes is >1 but no extra nodes available via hostfile",
     "ddp-errors:world-size-mismatch", "cause"),
    ("ds-nodes-without-hostfile",
     "  File \"/usr/local/lib/python3.10/dist-packages/deepspeed/launcher/runner.py\", line 433, in main\n"
     "    raise ValueError(\"Num nodes is >1 but no extra nodes available via hostfile\")\n"
     "ValueError: Num nodes is >1 but no extra nodes available via hostfile",
     "ddp-errors:world-size-mismatch", "cause"),
    # deepspeed/runtime/config.py _batch_assertion: a derived batch number came out 0
    ("ds-batch-zero",
     "AssertionError: Gradient accumulation steps: 0 has to be greater than 0",
     "ddp-errors:batch-size-mismatch", "cause"),
    ("ds-batch-zero",
     "[rank3]: AssertionError: Micro batch size per gpu: 0 has to be greater than 0",
     "ddp-errors:batch-size-mismatch", "cause"),
    # megatron/core/num_microbatches_calculator.py (megatron/microbatches.py before)
    ("megatron-global-batch",
     "AssertionError: global batch size (256) is not divisible by micro batch size (3) times data parallel "
     "size (8)",
     "ddp-errors:batch-size-mismatch", "cause"),
    ("megatron-global-batch",
     "[rank0]: AssertionError: global batch size (16) is not divisible by micro batch size (2) times data "
     "parallel size (16)",
     "ddp-errors:batch-size-mismatch", "cause"),
    # transformers/integrations/deepspeed.py HfTrainerDeepSpeedConfig.trainer_config_finalize: batch keys
    ("hf-ds-batch-keys",
     "ValueError: Please correct the following DeepSpeed config values that mismatch TrainingArguments "
     "values:\n- ds train_micro_batch_size_per_gpu=32 vs hf per_device_train_batch_size=4\n"
     "The easiest method is to set these DeepSpeed config values to 'auto'.",
     "ddp-errors:batch-size-mismatch", "cause"),
    ("hf-ds-batch-keys",
     "ValueError: Please correct the following DeepSpeed config values that mismatch TrainingArguments "
     "values:\n- ds gradient_accumulation_steps=1 vs hf gradient_accumulation_steps=8\n"
     "- ds train_batch_size=1000 vs hf train_batch_size (calculated)=16\n"
     "The easiest method is to set these DeepSpeed config values to 'auto'.",
     "ddp-errors:batch-size-mismatch", "cause"),
    # torch/csrc/distributed/c10d/socket.cpp SocketConnectOp::tryConnect: getaddrinfo failed, retried until
    # the timeout
    ("c10d-name-lookup",
     "[W socket.cpp:663] [c10d] The IPv6 network addresses of (trainer-master-0, 23456) cannot be retrieved "
     "(gai error: -2 - Name or service not known).",
     "ddp-errors:master-unreachable", "cause"),
    ("c10d-name-lookup",
     "[W501 10:00:00.000000000 socket.cpp:752] [c10d] The IPv4 network addresses of (node-0, 29500) cannot "
     "be retrieved (gai error: -3 - Temporary failure in name resolution).",
     "ddp-errors:master-unreachable", "cause"),
    ("c10d-name-lookup",
     "[W socket.cpp:764] [c10d] The IPv6 network addresses of (mac-studio.local, 29500) cannot be retrieved "
     "(gai error: 8 - nodename nor servname provided, or not known).",
     "ddp-errors:master-unreachable", "cause"),
    # torch/distributed/elastic/rendezvous/etcd_rendezvous.py: python-etcd's client never reached the server
    ("etcd-unreachable",
     "etcd.EtcdConnectionFailed: Connection to etcd failed due to MaxRetryError(\"HTTPConnectionPool("
     "host='etcd-server', port=2379): Max retries exceeded with url: /version\")",
     "ddp-errors:master-unreachable", "cause"),
    ("etcd-unreachable",
     "[rank0]: etcd.EtcdConnectionFailed: Connection to etcd failed due to ReadTimeoutError(\""
     "HTTPConnectionPool(host='10.0.0.5', port=2379): Read timed out.\")",
     "ddp-errors:master-unreachable", "cause"),
    # Open MPI's orterun/prterun help texts: a rank died and mpirun ended the job
    ("mpirun-rank-died",
     "--------------------------------------------------------------------------\n"
     "mpirun noticed that process rank 3 with PID 4242 on node node07 exited on signal 11 (Segmentation "
     "fault).\n"
     "--------------------------------------------------------------------------",
     "ddp-errors:rank-native-crash", "cause"),  # the rank's own segfault (rank-native-crash)
    ("mpirun-rank-died",
     "mpirun detected that one or more processes exited with non-zero status, thus causing\n"
     "the job to be terminated. The first process to do so was:\n\n"
     "  Process name: [[41207,1],3]\n  Exit code:    1",
     "ddp-errors:rank-failed-first", "knock-on"),
    ("mpirun-rank-died",
     "Primary job  terminated normally, but 1 process returned\n"
     "a non-zero exit code. Per user-direction, the job has been aborted.",
     "ddp-errors:rank-failed-first", "knock-on"),
    # torch/distributed/elastic/multiprocessing/api.py and deepspeed/launcher/launch.py sigkill_handler
    ("launcher-rank-exited",
     "E0501 10:00:00.123000 4242 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) "
     "local_rank: 0 (pid: 4243) of binary: /usr/bin/python3",
     "ddp-errors:rank-failed-first", "knock-on"),
    ("launcher-rank-exited",
     "[2024-05-01 10:00:00,000] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python', '-u', "
     "'train.py', '--local_rank=7', '--deepspeed', 'ds.json'] exits with return code = 1",
     "ddp-errors:rank-failed-first", "knock-on"),
    ("launcher-rank-exited",
     "[ERROR] [launch.py:325:sigkill_handler] ['/opt/conda/bin/python', '-u', 'finetune.py', "
     "'--local_rank=0'] exits with return code = -11",
     "ddp-errors:rank-native-crash", "cause"),
    # torch/distributed/fsdp/_flat_param.py FlatParamHandle._validate_tensors_to_flatten
    ("fsdp-flat-param",
     "ValueError: Must flatten tensors with uniform `requires_grad` when `use_orig_params=False`",
     "ddp-errors:fsdp-mixed-params", "cause"),
    ("fsdp-flat-param",
     "[rank1]: ValueError: Must flatten tensors with uniform `requires_grad` when `use_orig_params=False`",
     "ddp-errors:fsdp-mixed-params", "cause"),
    ("fsdp-flat-param",
     "ValueError: Must flatten tensors with uniform dtype but got torch.bfloat16 and torch.float32",
     "ddp-errors:fsdp-mixed-params", "cause"),
    # Slurm's srun (allocate.c, launch.c), sbatch and salloc: the request fits no node (slurm_errno.c strings)
    ("slurm-request-refused",
     "srun: error: Unable to allocate resources: Requested node configuration is not available",
     "slurm-job:step-node-options", "cause"),
    ("slurm-request-refused",
     "sbatch: error: Batch job submission failed: Requested node configuration is not available",
     "slurm-job:step-node-options", "cause"),
    ("slurm-request-refused",
     "salloc: Job allocation 550543 has been revoked.\n"
     "salloc: error: Job submit/allocate failed: Requested node configuration is not available",
     "slurm-job:step-node-options", "cause"),
    ("slurm-gres-refused",
     "srun: error: Unable to allocate resources: Invalid generic resource (gres) specification",
     "slurm-job:step-node-options", "cause"),
    ("slurm-gres-refused",
     "sbatch: error: Batch job submission failed: Invalid generic resource (gres) specification",
     "slurm-job:step-node-options", "cause"),
    ("slurm-cpus-refused",
     "srun: error: Unable to create step for job 99825: More processors requested than permitted",
     "slurm-job:step-node-options", "cause"),
    ("slurm-cpus-refused",
     "sbatch: error: Batch job submission failed: More processors requested than permitted",
     "slurm-job:step-node-options", "cause"),
    # torch/distributed/run.py parse_min_max_nnodes: --nnodes neither N nor MIN:MAX
    ("torchrun-nnodes",
     "RuntimeError: nnodes=1:2:3 is not in \"MIN:MAX\" format",
     "cli-args:bad-argument-value", "cause"),
    ("torchrun-nnodes",
     "  File \"/usr/local/lib/python3.10/dist-packages/torch/distributed/run.py\", line 615, in "
     "parse_min_max_nnodes\n"
     "RuntimeError: nnodes=2-4 is not in \"MIN:MAX\" format",
     "cli-args:bad-argument-value", "cause"),
]


@pytest.mark.parametrize(("family", "text", "conclusion", "role"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_family_is_read_by_its_words(family: str, text: str, conclusion: str, role: str) -> None:
    assert_first(text, family, conclusion, role)


# (family, text, conclusion it must not be first, what must be first instead or None)
NEAR_MISSES = [
    # Megatron's ensure_divisibility says no more than two numbers: which sizes, the line does not say
    ("parallel-sizes-vs-world",
     "AssertionError: 32 is not divisible by 3",
     "ddp-errors:world-size-mismatch", None),
    # a hand-built mesh that names a rank twice is the mesh's own list, not its size against the world
    ("mesh-vs-world",
     "RuntimeError: DeviceMesh cannot have duplicate values, but found [0, 0, 1, 1]",
     "ddp-errors:world-size-mismatch", None),
    # a script's own split of its batch, no parallel size in it
    ("parallel-sizes-vs-model",
     "ValueError: Batch size 7 is not divisible by micro batch size 2",
     "ddp-errors:world-size-mismatch", None),
    # Slurm's own CPU refusal inside an allocation is a step's request, not mpirun's slots
    ("mpirun-slots",
     "srun: error: Unable to create step for job 4242: More processors requested than permitted",
     "ddp-errors:world-size-mismatch", "slurm-job:step-node-options"),
    # the launcher's note that it runs on this node alone is no error
    ("ds-nodes-without-hostfile",
     "[2024-05-01 10:00:00,000] [WARNING] [runner.py:202:fetch_hostfile] Unable to find hostfile, will "
     "proceed with training with local resources only.",
     "ddp-errors:world-size-mismatch", None),
    # a config without any batch size is a missing key, not numbers that disagree
    ("ds-batch-zero",
     "AssertionError: Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided",
     "ddp-errors:batch-size-mismatch", None),
    ("megatron-global-batch",
     "ValueError: Batch size 7 is not divisible by micro batch size 2",
     "ddp-errors:batch-size-mismatch", None),
    # the same transformers check on a precision key is no batch arithmetic
    ("hf-ds-batch-keys",
     "ValueError: Please correct the following DeepSpeed config values that mismatch TrainingArguments "
     "values:\n- ds fp16.enabled=True vs hf fp16|fp16_full_eval+fp16_backend(amp)=False\n"
     "The easiest method is to set these DeepSpeed config values to 'auto'.",
     "ddp-errors:batch-size-mismatch", None),
    # the server side's lookup of its own addresses names no host to reach
    ("c10d-name-lookup",
     "[W socket.cpp:436] [c10d] The local IPv6 network addresses cannot be retrieved (gai error: -9 - "
     "Address family for hostname not supported).",
     "ddp-errors:master-unreachable", None),
    # etcd answered: a key not there is the rendezvous's state, not an address that does not answer
    ("etcd-unreachable",
     "etcd.EtcdKeyNotFound: Key not found : /torchelastic/p2p/run_default/rdzv/active_version",
     "ddp-errors:master-unreachable", None),
    # Open MPI that could not start its daemons ran no rank at all
    ("mpirun-rank-died",
     "--------------------------------------------------------------------------\n"
     "ORTE was unable to reliably start one or more daemons.\n"
     "This usually is caused by:\n\n* not finding the required libraries and/or binaries on\n"
     "  one or more nodes.",
     "ddp-errors:rank-failed-first", None),
    # SIGKILL from outside (the OOM killer) is host-faults' cause, not a rank's own error
    ("launcher-rank-exited",
     "E0501 10:00:00.123000 4242 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -9) "
     "local_rank: 7 (pid: 4250) of binary: /usr/bin/python3",
     "ddp-errors:rank-failed-first", "host-faults:killed-likely-oom"),
    ("launcher-rank-exited",
     "[ERROR] [launch.py:325:sigkill_handler] ['/opt/conda/bin/python', '-u', 'finetune.py', "
     "'--local_rank=0'] exits with return code = -9",
     "ddp-errors:rank-failed-first", "host-faults:killed-likely-oom"),
    # parameters on two devices is where the model was built, not what FSDP flattens together
    ("fsdp-flat-param",
     "ValueError: Must flatten tensors on the same device but got both cpu and cuda:0",
     "ddp-errors:fsdp-mixed-params", None),
    # a policy refusal is the account's limits, not a shape no node has
    ("slurm-request-refused",
     "srun: error: Unable to allocate resources: Job violates accounting/QOS policy (job submit limit, "
     "user's size and/or time limits)",
     "slurm-job:step-node-options", None),
    ("slurm-gres-refused",
     "sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified",
     "slurm-job:step-node-options", None),
    # a step that waits for another step is blocked, not refused
    ("slurm-cpus-refused",
     "srun: error: Unable to create step for job 4242: Requested nodes are busy",
     "slurm-job:step-node-options", "slurm-job:step-creation-blocked"),
    # torchrun's own command line, echoed by a launch script, is no refusal
    ("torchrun-nnodes",
     "+ torchrun --nnodes=1:2 --nproc_per_node=8 --rdzv_backend=c10d train.py",
     "cli-args:bad-argument-value", None),
]


@pytest.mark.parametrize(("family", "text", "not_first", "first"), NEAR_MISSES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_reads_otherwise(family: str, text: str, not_first: str, first: str | None) -> None:
    assert_near_miss(text, family, not_first, first)
