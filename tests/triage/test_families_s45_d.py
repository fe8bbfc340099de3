"""Message families of session 45 (d): a rank other than 0 that Horovod's stall inspector names as
never having submitted the stalled tensors (older operations.cc's `[missing ranks: N]`, stall_inspector.cc's
`N!: [...]` past the shutdown time; rank 0 prints the list, so a missing rank 0 is alive and busy elsewhere),
the NVSwitch driver's fatal error entry (error_nvswitch.c `SXid (PCI:...): N, Severity 1 Engine instance`),
a resume from a checkpoint without its training state (Lightning's `Trying to restore optimizer state but
checkpoint contains only the model`, a script's `KeyError: 'optimizer'`), and Megatron's iteration line that
leaves out a NaN loss (training_log writes a loss only `if avg > 0.0`). Two messages or more of each family
read to their conclusion, and near misses in similar words that must read otherwise."""

from __future__ import annotations

import pytest

from tests.triage.families import assert_first, assert_near_miss

_STALL = ("One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks "
          "and are waiting for remainder of ranks for more than 60 seconds. This may indicate that different "
          "ranks are trying to submit different tensors or that only subset of ranks is submitting "
          "tensors, which will cause deadlock. ")

# (family, text, conclusion)
CASES = [
    ("horovod-stalled-ranks",
     "[2022-03-14 08:02:11.402113: E /tmp/pip-req-build/horovod/common/stall_inspector.cc:107] " + _STALL
     + "\nMissing ranks:\n3!: [DistributedAdam_Allreduce/cond_12/HorovodAllreduce_grads_12_0, "
     "DistributedAdam_Allreduce/cond_13/HorovodAllreduce_grads_13_0]\nOne or more rank (marked by \"!\") is "
     "stalled for longer than 300 seconds. Will shutdown.",
     "ddp-errors:rank-stopped-first"),
    ("horovod-stalled-ranks",
     "[1,0]<stderr>:[2020-01-21 17:40:02.118830: E horovod/common/stall_inspector.cc:105] " + _STALL + "\n"
     "[1,0]<stderr>:Stalled ranks:\n"
     "[1,0]<stderr>:5!: [allreduce.module.layer4.1.conv2.weight, allreduce.module.fc.bias ...]\n"
     "[1,0]<stderr>:One or more rank (marked by \"!\") is stalled for longer than 120 seconds. "
     "Will shutdown.",
     "ddp-errors:rank-stopped-first"),
    ("horovod-stalled-ranks",
     "W0611 10:21:07.512 " + _STALL + "\nStalled ops:\n"
     "HorovodAllreduce_gradients_dense_1_MatMul_grad_MatMul_1_0 [missing ranks: 1, 6]\n"
     "HorovodAllreduce_gradients_dense_1_BiasAdd_grad_BiasAddGrad_0 [missing ranks: 1, 6]",
     "ddp-errors:rank-stopped-first"),
    ("horovod-stalled-ranks",
     "[1,0]<stderr>:[2021-07-02 11:03:44.020117: E horovod/common/stall_inspector.cc:107] " + _STALL + "\n"
     "[1,0]<stderr>:Missing ranks:\n"
     "[1,0]<stderr>:0!: [allreduce.encoder.layers.0.self_attn.k_proj.weight]\n"
     "[1,0]<stderr>:7!: [allreduce.encoder.layers.0.self_attn.k_proj.weight, allreduce.decoder.embed.bias]\n"
     "[1,0]<stderr>:One or more rank (marked by \"!\") is stalled for longer than 120 seconds. "
     "Will shutdown.",
     "ddp-errors:rank-stopped-first"),
    ("nvswitch-sxid-severity",
     "[Tue Mar  4 02:17:45 2025] nvidia-nvswitch3: SXid (PCI:0000:07:00.0): 20034, Severity 1 Engine "
     "instance 08 Sub-engine instance 00",
     "gpu-hardware:nvlink-error"),
    ("nvswitch-sxid-severity",
     "kernel: nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Severity 1 Engine instance 33 Sub-engine "
     "instance 00\nkernel: nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Data {0x00000000, 0x00000001}",
     "gpu-hardware:nvlink-error"),
    ("resume-without-training-state",
     "Restoring states from the checkpoint path at checkpoints/last.ckpt\n"
     "KeyError: 'Trying to restore optimizer state but checkpoint contains only the model. This is probably "
     "due to `ModelCheckpoint.save_weights_only` being set to `True`.'",
     "checkpoint-problems:weights-only-resume"),
    ("resume-without-training-state",
     "Traceback (most recent call last):\n  File \"finetune.py\", line 212, in <module>\n"
     "    opt.load_state_dict(state[\"optimizer_state_dict\"])\nKeyError: 'optimizer_state_dict'",
     "checkpoint-problems:weights-only-resume"),
    ("resume-without-training-state",
     "=> resuming from weights/released_model.pth\n  File \"tools/train.py\", line 88, in resume\n"
     "    optimizer.load_state_dict(ckpt['optimizer'])\nKeyError: 'optimizer'",
     "checkpoint-problems:weights-only-resume"),
    ("megatron-loss-left-out",
     " iteration      120/  500000 | consumed samples:        61440 | elapsed time per iteration "
     "(ms): 5210.3 | learning rate: 1.800E-05 | global batch size:   512 | loss scale: 1.0 | "
     "grad norm: 2.113 | number of skipped iterations:   0 | number of nan iterations:   0 |",
     "nan-loss:loss-diverged"),
    ("megatron-loss-left-out",
     " [2025-02-01 10:00:00] iteration       50/    1000 | consumed samples:         3200 | elapsed time per "
     "iteration (ms): 812.4 | learning rate: 2.500000E-05 | global batch size:    64 | loss scale: 1.0 | "
     "grad norm: 0.913 | num zeros: 0.0 | number of skipped iterations:   0 | number of nan iterations: "
     "  0 |",
     "nan-loss:loss-diverged"),
]


@pytest.mark.parametrize(("family", "text", "conclusion"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_family_reads_to_its_conclusion(family: str, text: str, conclusion: str) -> None:
    assert_first(text, family, conclusion)


# (family, text, what must not come first, what must come first or None)
NEAR_MISSES = [
    # the stall warning with no list of ranks: every rank here waits, the one that stopped is not named
    ("horovod-stalled-ranks",
     "[2022-03-14 08:02:11.402113: W horovod/common/stall_inspector.cc:107] " + _STALL,
     "ddp-errors:rank-stopped-first", "ddp-errors:ranks-wait-for-peer"),
    # only rank 0, the coordinator that prints the list, is missing: it is alive and busy elsewhere
    ("horovod-stalled-ranks",
     "[2022-03-14 08:02:11.402113: W horovod/common/stall_inspector.cc:107] " + _STALL
     + "\nMissing ranks:\n0: [DistributedSGD_Allreduce/cond/HorovodAllreduce_grads_0, "
     "DistributedSGD_Allreduce/cond_1/HorovodAllreduce_grads_1_0]",
     "ddp-errors:rank-stopped-first", "ddp-errors:ranks-wait-for-peer"),
    ("horovod-stalled-ranks",
     "WARNING: " + _STALL + "\nStalled ops:\nHorovodBroadcast_conv1_weights_0 [missing ranks: 0]",
     "ddp-errors:rank-stopped-first", "ddp-errors:ranks-wait-for-peer"),
    # a numbered list of a user's own print is not a stall list
    ("horovod-stalled-ranks",
     "3: [0.25, 0.5, 0.75]",
     "ddp-errors:rank-stopped-first", None),
    # `Missing ranks` inside a sentence of another tool is no stall inspector's list
    ("horovod-stalled-ranks",
     "ValueError: Missing ranks: [2, 3] in the placement plan for stage 1",
     "ddp-errors:rank-stopped-first", None),
    # a non-fatal NVSwitch error entry (severity 0) is not a failed link
    ("nvswitch-sxid-severity",
     "nvidia-nvswitch2: SXid (PCI:0000:86:00.0): 19049, Severity 0 Engine instance 02 Sub-engine instance 00",
     "gpu-hardware:nvlink-error", None),
    # an optimizer state of another structure is there, not missing
    ("resume-without-training-state",
     "    optimizer.load_state_dict(checkpoint['optimizer'])\n  File \"torch/optim/optimizer.py\", line 108, "
     "in load_state_dict\n    saved_groups = state_dict['param_groups']\nKeyError: 'param_groups'",
     "checkpoint-problems:weights-only-resume", None),
    # a key of the optimizer's config, not of a checkpoint
    ("resume-without-training-state",
     "KeyError: 'optimizer_type'",
     "checkpoint-problems:weights-only-resume", None),
    # the loss is printed: nothing is left out
    ("megatron-loss-left-out",
     " iteration      120/  500000 | consumed samples:        61440 | elapsed time per iteration "
     "(ms): 5210.3 | learning rate: 1.800E-05 | global batch size:   512 | lm loss: 2.345678E+00 | "
     "loss scale: 1.0 | grad norm: 2.113 | number of skipped iterations:   0 | number of nan "
     "iterations:   0 |",
     "nan-loss:loss-diverged", None),
    # fp16 skipped the interval's steps: the loss is missing for the overflow, not for a NaN average
    ("megatron-loss-left-out",
     " iteration       10/  500000 | consumed samples:         5120 | elapsed time per iteration "
     "(ms): 4980.1 | learning rate: 0.000E+00 | global batch size:   512 | loss scale: 4294967296.0 | "
     "number of skipped iterations:  10 | number of nan iterations:   0 |",
     "nan-loss:loss-diverged", None),
]


@pytest.mark.parametrize(("family", "text", "not_first", "first"), NEAR_MISSES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_reads_otherwise(family: str, text: str, not_first: str, first: str | None) -> None:
    assert_near_miss(text, family, not_first, first)
