"""The registry of scenario jobs: what each reproduces and what a correct diagnosis says.

Standard library only (the launcher imports it on test-cluster nodes with a bare python3).
A job's script is `SCENARIO_ROOT/<script>`: one folder per job beside this file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SCENARIO_ROOT = Path(__file__).resolve().parent  # scenarios/jobs/: one folder per job


@dataclass(frozen=True)
class ScenarioSpec:
    """What a scenario reproduces and what a correct diagnosis of it says."""

    name: str
    script: str  # path of its train.py, relative to SCENARIO_ROOT (scenarios/jobs/)
    description: dict[str, str]  # {"en": ..., "zh": ...}
    taxonomy: str | None  # the expected taxonomy id; None when nothing is wrong
    severity: str | None = None  # the expected severity where the scenario fixes it
    seed: str | None = None  # the field note it reproduces (file in seeds/)
    related: tuple[str, ...] = ()  # other taxonomy ids a diagnosis may also name
    fake_bin: str | None = None  # directory of fake tools to put first on the tool's PATH
    requires: tuple[str, ...] = ()  # modules beyond the standard library the job imports
    # The expected "runbook:conclusion" where the scenario fixes it (a diagnosis benchmark
    # scores against it). A job over several hosts: the conclusion on the host at fault.
    conclusion: str | None = None
    # Python code (a file relative to SCENARIO_ROOT) the launcher runs with `python3 -c` before
    # the job, apart from it: another user's process on the same machine (launch.py).
    bystander: str | None = None


SCENARIOS: dict[str, ScenarioSpec] = {
    "loader_accumulating": ScenarioSpec(
        name="loader_accumulating",
        script="loader_accumulating/train.py",
        description={
            "en": "Model initialised, one CPU core at 100% tokenising short documents, no "
                  "training step yet: the data loader accumulates B*T+1 = 65537 tokens "
                  "before it yields the first batch (about 120 s / speed).",
            "zh": "模型已初始化，单个 CPU 核心 100% 在对短文档做 tokenize，训练循环尚未开始："
                  "数据加载器要累积 B*T+1 = 65537 个 token 才产出第一个批次（约 120 秒 / speed）。",
        },
        taxonomy="hang.dataloader",
        seed="000_dadab12364f791e6.txt",
        conclusion="training-hang:dataloader-accumulating",
    ),
    "nvidia_smi_hang": ScenarioSpec(
        name="nvidia_smi_hang",
        script="nvidia_smi_hang/train.py",
        description={
            "en": "Self-play RL job whose log stops at \"Collecting trajectories...\": its "
                  "workers are stuck initialising their engine, the main process waits on "
                  "them forever (all in state S, no CPU), and nvidia-smi hangs.",
            "zh": "自我对弈强化学习任务，日志停在 \"Collecting trajectories...\"：worker 卡在"
                  "引擎初始化，主进程无限等待结果（全部处于 S 状态，不占 CPU），nvidia-smi 卡住。",
        },
        taxonomy="hang.gpu-driver",
        seed="001_1ea3a68e4614ca9e.txt",
        related=("hang.ray-init", "hang.ray-collect"),
        fake_bin="nvidia_smi_hang/bin",
        conclusion="training-hang:gpu-driver-hang",
    ),
    "healthy": ScenarioSpec(
        name="healthy",
        script="healthy/train.py",
        description={
            "en": "A healthy job: linear regression trained by gradient descent, a step line "
                  "twice a second with a falling loss. Nothing to find.",
            "zh": "健康的任务：用梯度下降训练线性回归，每秒两行 step 日志，loss 持续下降。没有问题。",
        },
        taxonomy=None,
        severity="ok",
        conclusion="training-hang:healthy",
    ),
    "ray_actor_init_hang": ScenarioSpec(
        name="ray_actor_init_hang",
        script="ray_actor_init_hang/train.py",
        description={
            "en": "Self-play RL job on its own local Ray cluster whose log stops at \"Collecting "
                  "trajectories...\": its 8 Ray actors block in __init__ (engine init), stay "
                  "PENDING_CREATION, and the driver waits in ray.get forever. Needs ray.",
            "zh": "在自己的本地 Ray 集群上运行的自我对弈强化学习任务，日志停在 \"Collecting "
                  "trajectories...\"：8 个 Ray actor 卡在 __init__（引擎初始化），一直处于 "
                  "PENDING_CREATION，driver 在 ray.get 中无限等待。需要 ray。",
        },
        taxonomy="hang.ray-init",
        seed="001_1ea3a68e4614ca9e.txt",
        related=("hang.ray-collect",),
        requires=("ray",),
        conclusion="training-hang:ray-workers-initialising",
    ),
    "ray_collect_hang": ScenarioSpec(
        name="ray_collect_hang",
        script="ray_collect_hang/train.py",
        description={
            "en": "Self-play RL job on its own local Ray cluster: 8 actors initialise (\"Created "
                  "8/8 workers...\"), then every worker.run call blocks forever on a lock and the "
                  "driver logs \"Waiting for 8 workers...\" around ray.wait timeouts. Needs ray.",
            "zh": "在自己的本地 Ray 集群上运行的自我对弈强化学习任务：8 个 actor 初始化完成"
                  "（\"Created 8/8 workers...\"），之后每个 worker.run 调用都永远阻塞在一把锁上，"
                  "driver 在 ray.wait 超时之间打印 \"Waiting for 8 workers...\"。需要 ray。",
        },
        taxonomy="hang.ray-collect",
        seed="001_1ea3a68e4614ca9e.txt",
        related=("hang.ray-init",),
        requires=("ray",),
        conclusion="training-hang:ray-collect-stuck",
    ),
    "ddp_mismatch": ScenarioSpec(
        name="ddp_mismatch",
        script="ddp_mismatch/train.py",
        description={
            "en": "Two-rank torch.distributed (gloo, CPU) job: a few training steps with "
                  "all_reduce'd gradients, then the ranks take different code paths: rank 0 "
                  "waits forever in an extra dist.all_reduce only it calls, rank 1 in "
                  "dist.barrier() (gloo timeout 1 h). Needs torch.",
            "zh": "两个 rank 的 torch.distributed（gloo，CPU）任务：先用 all_reduce 同步梯度训练"
                  "几步，之后各 rank 走了不同的代码路径：rank 0 永远等在只有它调用的额外 "
                  "dist.all_reduce 中，rank 1 等在 dist.barrier() 中（gloo 超时 1 小时）。需要 torch。",
        },
        taxonomy="hang.collective",
        seed="002_8c5ded5e8229fdf4.txt",
        requires=("torch",),
        conclusion="training-hang:collective-mismatch",
    ),
    "master_port_taken": ScenarioSpec(
        name="master_port_taken",
        script="master_port_taken/train.py",
        description={
            "en": "A two-rank torch.distributed (gloo, CPU) launch whose MASTER_PORT is taken: "
                  "a leftover TCPStore of a previous run still listens on it, rank 0's "
                  "init_process_group fails with EADDRINUSE, the launcher exits non-zero and "
                  "the leftover stays. Needs torch.",
            "zh": "MASTER_PORT 已被占用的两 rank torch.distributed（gloo，CPU）启动：上一次运行残留的 "
                  "TCPStore 仍在监听该端口，rank 0 的 init_process_group 因 EADDRINUSE 失败，启动器以"
                  "非零状态退出，残留进程仍在。需要 torch。",
        },
        taxonomy="launch.port-in-use",
        severity="critical",
        seed="002_8c5ded5e8229fdf4.txt",
        requires=("torch",),
        conclusion="ddp-errors:port-in-use",
    ),
    "unrecognized_args": ScenarioSpec(
        name="unrecognized_args",
        script="unrecognized_args/train.py",
        description={
            "en": "A launch whose command line the training program's argparse parser rejects: "
                  "the built-in launch command gives a boolean flag a value (--model-use-moe "
                  "true); other wrong options (an old name such as --lr-warmup 100) come as extra "
                  "arguments. The job prints usage and 'train.py: error: unrecognized arguments: "
                  "...' and exits with status 2. The program (python -m llm.training.train, "
                  "next to train.py) answers --help.",
            "zh": "训练程序的 argparse 解析器拒绝了启动命令行：内置的启动命令给布尔参数带了值"
                  "（--model-use-moe true）；其他错误参数（如旧名称 --lr-warmup 100）可作为额外参数"
                  "传入。作业打印 usage 和 'train.py: error: unrecognized arguments: ...' 后以状态 2 "
                  "退出。该程序（train.py 旁边的 python -m llm.training.train）可以运行 --help。",
        },
        taxonomy="launch.cli-args",
        seed="002_8c5ded5e8229fdf4.txt",
        conclusion="cli-args:boolean-flag-with-value",
    ),
    "world_size_exceeds_devices": ScenarioSpec(
        name="world_size_exceeds_devices",
        script="world_size_exceeds_devices/train.py",
        description={
            "en": "A torch.distributed (gloo, CPU) job configured for 4 ranks per node "
                  "(world_size 4) on a node that gave it two devices (CUDA_VISIBLE_DEVICES=0,1): "
                  "the launcher starts one process per device, and ranks 0 and 1 wait in "
                  "init_process_group for ranks 2 and 3, which never come (timeout 30 min). "
                  "Needs torch.",
            "zh": "按每节点 4 个 rank（world_size 为 4）配置的 torch.distributed（gloo，CPU）任务，"
                  "节点只分配了两个设备（CUDA_VISIBLE_DEVICES=0,1）：启动器按设备数启动进程，"
                  "rank 0 和 1 在 init_process_group 中等待永远不会到来的 rank 2 和 3（超时 30 分钟）。"
                  "需要 torch。",
        },
        taxonomy="launch.world-size",
        severity="critical",
        seed="002_8c5ded5e8229fdf4.txt",
        related=("launch.rendezvous",),
        requires=("torch",),
        conclusion="ddp-errors:world-size-mismatch",
    ),
    "data_generation_stuck": ScenarioSpec(
        name="data_generation_stuck",
        script="data_generation_stuck/train.py",
        description={
            "en": "GKD-style job whose log stops at '(TaskRunner pid=N) Generating train split: 0 "
                  "examples [00:00, ? examples/s]': its TaskRunner process opens the train data "
                  "file, a named pipe nobody writes, and sleeps in open() forever (state S, no "
                  "CPU); the driver waits for it.",
            "zh": "GKD 类任务，日志停在 '(TaskRunner pid=N) Generating train split: 0 examples "
                  "[00:00, ? examples/s]'：TaskRunner 进程打开训练数据文件，而该文件是一个没有写入者"
                  "的命名管道，于是永远在 open() 中休眠（S 状态，不占 CPU）；主进程一直等待它。",
        },
        taxonomy="hang.dataloader",
        seed="004_38db7c1f00092d63.txt",
        conclusion="rlhf-hang:data-generation-stuck",
    ),
    "nan_loss": ScenarioSpec(
        name="nan_loss",
        script="nan_loss/train.py",
        description={
            "en": "Real torch training loop (MLP regression, SGD) with a learning rate far too high "
                  "(5.0), no warmup and no gradient clipping: the loss goes to inf within a few "
                  "steps, then NaN, and the job trains on logging `loss nan | grad_norm nan`. "
                  "Needs torch.",
            "zh": "真实的 torch 训练循环（MLP 回归，SGD），学习率过大（5.0）、没有 warmup、没有梯度裁剪："
                  "几步之内损失变为 inf，随后变为 NaN，任务继续训练并打印 `loss nan | grad_norm nan`。"
                  "需要 torch。",
        },
        taxonomy="numerics.nan-loss",
        seed="003_1dd9d86bdb9eee1e.txt",
        related=("numerics.lr-schedule",),
        requires=("torch",),
        conclusion="nan-loss:lr-too-high",
    ),
    "cuda_oom": ScenarioSpec(
        name="cuda_oom",
        script="cuda_oom/train.py",
        description={
            "en": "GPT pretraining job (1.3B parameters, batch 16 x 2048, attention kept in full) "
                  "whose first forward pass does not fit an 80 GB GPU: real model code runs on torch's "
                  "meta device under a model of the CUDA caching allocator, which raises "
                  "torch.OutOfMemoryError with PyTorch's message; the job exits 1. Needs torch.",
            "zh": "GPT 预训练任务（13 亿参数，批量 16 x 2048，完整保存注意力矩阵），第一次前向传播就放不进 "
                  "80 GB 的 GPU：真实的模型代码在 torch 的 meta 设备上运行，由 CUDA 缓存分配器的模型"
                  "分配显存，抛出带 PyTorch 原始信息的 torch.OutOfMemoryError；任务以状态 1 退出。"
                  "需要 torch。",
        },
        taxonomy="oom.gpu",
        seed="002_8c5ded5e8229fdf4.txt",
        requires=("torch",),
        conclusion="cuda-oom:oom-batch-or-model",
    ),
    "state_dict_mismatch": ScenarioSpec(
        name="state_dict_mismatch",
        script="state_dict_mismatch/train.py",
        description={
            "en": "Resubmitted training job: attempt 1 (DDP, gloo, CPU) trains and torch.saves a "
                  "complete checkpoint from the DDP-wrapped model (keys carry `module.`); attempt 2 "
                  "calls model.load_state_dict(torch.load(...)) on the bare model and dies of torch's "
                  "\"Missing key(s) in state_dict\" RuntimeError. The checkpoint stays on disk "
                  "(--variant config: saved with MoE blocks, resumed without). Needs torch.",
            "zh": "被重新提交的训练任务：第 1 次运行（DDP，gloo，CPU）训练后用 torch.save 从 DDP 封装的模型"
                  "保存完整检查点（键带 `module.` 前缀）；第 2 次运行在未封装的模型上调用 "
                  "model.load_state_dict(torch.load(...))，因 torch 的 \"Missing key(s) in state_dict\" "
                  "RuntimeError 退出。检查点保留在磁盘上（--variant config：用 MoE 保存、不用 MoE 恢复）。"
                  "需要 torch。",
        },
        taxonomy="checkpoint.key-mismatch",
        seed="002_8c5ded5e8229fdf4.txt",
        requires=("torch",),
        conclusion="checkpoint-problems:prefix-mismatch",
    ),
    "zero3_ungathered_save": ScenarioSpec(
        name="zero3_ungathered_save",
        script="zero3_ungathered_save/train.py",
        description={
            "en": "Two-rank torch.distributed (gloo, CPU) job that partitions its model the way ZeRO "
                  "stage 3 does (each rank a shard, the module empty torch.Size([0]) placeholders), "
                  "trains 5 steps with all_gather/all_reduce, writes its shards to "
                  "out/checkpoint-5/global_step5/, then saves the final model with "
                  "torch.save(model.state_dict()): placeholders. Loading it for evaluation dies of "
                  "torch's \"copying a param with shape torch.Size([0]) from checkpoint\". Needs torch.",
            "zh": "两个 rank 的 torch.distributed（gloo，CPU）任务：像 ZeRO stage 3 那样切分模型（每个 rank "
                  "一个分片，模块里是空的 torch.Size([0]) 占位张量），用 all_gather/all_reduce 训练 5 步，"
                  "把分片写入 out/checkpoint-5/global_step5/，再用 torch.save(model.state_dict()) 保存最终"
                  "模型：保存的是占位张量。评估时加载它，因 torch 的 \"copying a param with shape "
                  "torch.Size([0]) from checkpoint\" 而退出。需要 torch。",
        },
        taxonomy="checkpoint.not-gathered",
        requires=("torch",),
        conclusion="checkpoint-problems:zero3-not-gathered",
    ),
    "two_nodes_one_checkpoint": ScenarioSpec(
        name="two_nodes_one_checkpoint",
        script="two_nodes_one_checkpoint/train.py",
        description={
            "en": "Four-rank torch.distributed (gloo, CPU) job laid out as 2 nodes x 2 ranks over one "
                  "directory that plays slow shared storage: the script saves when LOCAL_RANK == 0, so "
                  "rank 0 (node 0) and rank 2 (node 1) both torch.save to ckpt/tmp.pt and os.replace it "
                  "to ckpt/last.pt at once; the second rename dies of \"FileNotFoundError: [Errno 2] No "
                  "such file or directory: 'ckpt/tmp.pt' -> 'ckpt/last.pt'\" and the launcher stops "
                  "the other ranks. Needs torch.",
            "zh": "按 2 个节点 x 2 个 rank 布局的四 rank torch.distributed（gloo，CPU）任务，共用一个模拟慢速"
                  "共享存储的目录：脚本在 LOCAL_RANK == 0 时保存，于是 rank 0（节点 0）和 rank 2（节点 1）"
                  "同时 torch.save 到 ckpt/tmp.pt 并 os.replace 为 ckpt/last.pt；第二次重命名因 "
                  "\"FileNotFoundError: [Errno 2] No such file or directory: 'ckpt/tmp.pt' -> "
                  "'ckpt/last.pt'\" 而失败，启动器随后停止其他 rank。需要 torch。",
        },
        taxonomy="checkpoint.concurrent-writers",
        related=("checkpoint.incomplete-resume",),
        requires=("torch",),
        conclusion="checkpoint-problems:shared-path-writers",
    ),
    # One rank per host of a 4-rank gloo job (start each rank on its own host with RANK,
    # WORLD_SIZE=4, MASTER_ADDR/MASTER_PORT of rank 0's host): tests/e2e/test_cross_rank.py.
    "gloo_async_mismatch": ScenarioSpec(
        name="gloo_async_mismatch",
        script="gloo_async_mismatch/train.py",
        description={
            "en": "One rank per host of a 4-rank torch.distributed (gloo, CPU) job: after 3 steps the "
                  "ranks share metrics with an async collective, ranks 0-2 all_gather, rank 3 "
                  "broadcast; every rank polls work.is_completed() forever (identical stacks) and "
                  "dumps its flight record. Needs torch.",
            "zh": "每台主机一个 rank 的 4 rank torch.distributed（gloo，CPU）任务：训练 3 步后用异步集合通信"
                  "交换指标，rank 0-2 调用 all_gather，rank 3 调用 broadcast；所有 rank 永远轮询 "
                  "work.is_completed()（调用栈完全相同），并转储各自的 flight recorder。需要 torch。",
        },
        taxonomy="hang.collective",
        requires=("torch",),
        conclusion="training-hang:collective-order-mismatch",
    ),
    "gloo_rank_outside": ScenarioSpec(
        name="gloo_rank_outside",
        script="gloo_rank_outside/train.py",
        description={
            "en": "One rank per host of a 4-rank torch.distributed (gloo, CPU) job: at step 5 rank 2 "
                  "waits forever in save_shard (a lock nobody releases) while ranks 0, 1, 3 wait in "
                  "dist.all_reduce for it. Needs torch.",
            "zh": "每台主机一个 rank 的 4 rank torch.distributed（gloo，CPU）任务：第 5 步时 rank 2 永远等在 "
                  "save_shard 中（一把没人释放的锁），rank 0、1、3 在 dist.all_reduce 中等它。需要 torch。",
        },
        taxonomy="hang.collective",
        related=("perf.straggler",),
        requires=("torch",),
        conclusion="training-hang:rank-out-of-step",
    ),
    "gloo_rank_behind": ScenarioSpec(
        name="gloo_rank_behind",
        script="gloo_rank_behind/train.py",
        description={
            "en": "One rank per host of a 4-rank torch.distributed (gloo, CPU) job: rank 2 skips a "
                  "batch with a non-finite loss before the gradient all_reduce, so it is one "
                  "collective behind; it ends the epoch early and waits for a checkpoint while ranks "
                  "0, 1, 3 wait in the last all_reduce. Needs torch.",
            "zh": "每台主机一个 rank 的 4 rank torch.distributed（gloo，CPU）任务：rank 2 在梯度 all_reduce "
                  "之前跳过了一个损失非有限的批次，于是落后一个集合通信；它提前结束本轮并等待检查点，"
                  "rank 0、1、3 则等在最后一个 all_reduce 中。需要 torch。",
        },
        taxonomy="hang.collective",
        related=("perf.straggler",),
        requires=("torch",),
        conclusion="training-hang:rank-behind",
    ),
    "gloo_missing_rank": ScenarioSpec(
        name="gloo_missing_rank",
        script="gloo_missing_rank/train.py",
        description={
            "en": "One rank per host of a 4-rank torch.distributed (gloo, CPU) job started on three "
                  "hosts only (ranks 0, 1, 3): they wait in init_process_group for rank 2 forever. "
                  "Needs torch.",
            "zh": "每台主机一个 rank 的 4 rank torch.distributed（gloo，CPU）任务只在三台主机上启动"
                  "（rank 0、1、3）：它们在 init_process_group 中永远等待 rank 2。需要 torch。",
        },
        taxonomy="launch.rendezvous",
        requires=("torch",),
        conclusion="training-hang:rank-missing-here",
    ),
    "gloo_nccl_drift": ScenarioSpec(
        name="gloo_nccl_drift",
        script="gloo_nccl_drift/train.py",
        description={
            "en": "One rank per host of a 4-rank torch.distributed (gloo, CPU) job whose host node02 "
                  "was launched with other NCCL settings (NCCL_IB_DISABLE=1, NCCL_SOCKET_IFNAME=eth9): "
                  "its rank runs its all_reduce on another transport's group and every rank waits in "
                  "the same dist.all_reduce forever. Needs torch.",
            "zh": "每台主机一个 rank 的 4 rank torch.distributed（gloo，CPU）任务，其中 node02 以不同的 NCCL "
                  "设置启动（NCCL_IB_DISABLE=1、NCCL_SOCKET_IFNAME=eth9）：它的 rank 在另一种传输方式的"
                  "进程组上做 all_reduce，所有 rank 永远等在同一个 dist.all_reduce 中。需要 torch。",
        },
        taxonomy="launch.environment",
        related=("hang.collective",),
        requires=("torch",),
        conclusion="training-hang:settings-differ-here",
    ),
    # Issue #24, "verdicts as specific as the evidence": tests/e2e/test_verdict_scenarios.py.
    "gloo_lone_rank": ScenarioSpec(
        name="gloo_lone_rank",
        script="gloo_missing_rank/train.py",  # the same rank program, started as rank 0 of 2 alone
        description={
            "en": "Rank 0 of a 2-rank torch.distributed (gloo, CPU) job started alone on its host "
                  "(RANK=0, WORLD_SIZE=2, MASTER_ADDR/MASTER_PORT as torchrun sets them); rank 1 is "
                  "never started. Rank 0 holds the TCPStore and waits in init_process_group for its "
                  "peer forever (gloo timeout 1 h). Needs torch.",
            "zh": "两 rank 的 torch.distributed（gloo，CPU）任务中的 rank 0 独自在其主机上启动"
                  "（RANK=0、WORLD_SIZE=2，MASTER_ADDR/MASTER_PORT 与 torchrun 设置的一样）；rank 1 从未"
                  "启动。rank 0 持有 TCPStore，在 init_process_group 中永远等待它的对端（gloo 超时 1 小时）。"
                  "需要 torch。",
        },
        taxonomy="launch.rendezvous",
        severity="critical",
        requires=("torch",),
        conclusion="training-hang:waiting-in-rendezvous",
    ),
    "eight_ranks_two_missing": ScenarioSpec(
        name="eight_ranks_two_missing",
        script="eight_ranks_two_missing/train.py",
        description={
            "en": "One rank per host of an 8-rank torch.distributed (gloo, CPU) job, started on six "
                  "hosts only (ranks 0-5; rank 6's host runs nothing, rank 7's is down). Before "
                  "init_process_group each rank prepares its data shard through a DataLoader (one "
                  "worker) and logs progress, so five logs keep moving; rank 3's shard has a file "
                  "that never arrives (a FIFO nobody writes): its worker sleeps in open() and its "
                  "main thread waits in the DataLoader, its log stopped. Needs torch.",
            "zh": "每台主机一个 rank 的 8 rank torch.distributed（gloo，CPU）任务，只在六台主机上启动"
                  "（rank 0-5；rank 6 的主机上什么也没运行，rank 7 的主机宕机）。在 init_process_group "
                  "之前，每个 rank 通过 DataLoader（一个 worker）准备自己的数据分片并打印进度，所以五份"
                  "日志一直在更新；rank 3 的分片中有一个永远读不到的文件（没有写入者的 FIFO）：它的 worker "
                  "在 open() 中休眠，主线程在 DataLoader 中等待，日志停止。需要 torch。",
        },
        taxonomy="hang.dataloader",
        related=("launch.rendezvous",),
        requires=("torch",),
        conclusion="training-hang:dataloader-worker-stuck",  # node04 (rank 3)
    ),
    "dataloader_fork_deadlock": ScenarioSpec(
        name="dataloader_fork_deadlock",
        script="dataloader_fork_deadlock/train.py",
        description={
            "en": "A text classifier trained on CPU through a DataLoader (2 workers, fork, not "
                  "persistent) whose dataset tokenises through a cache guarded by a threading.Lock. "
                  "Epoch 1 trains; at its end a background thread snapshots the cache holding the "
                  "lock, and epoch 2 forks its workers meanwhile: each inherits the lock held, with "
                  "no thread to release it, and blocks forever in TokenCache.lookup (futex wait); the "
                  "main thread waits in the DataLoader. Needs torch.",
            "zh": "在 CPU 上通过 DataLoader（2 个 worker、fork、非持久）训练的文本分类器，其数据集通过一个"
                  "由 threading.Lock 保护的缓存做分词。第 1 个 epoch 正常训练；结束时一个后台线程持有该锁"
                  "保存缓存快照，而第 2 个 epoch 恰在此时 fork 出 worker：每个 worker 都继承了处于占用状态"
                  "的锁，却没有线程会释放它，于是永远阻塞在 TokenCache.lookup 中（futex 等待）；主线程在 "
                  "DataLoader 中等待。需要 torch。",
        },
        taxonomy="hang.dataloader",
        requires=("torch",),
        conclusion="training-hang:dataloader-fork-deadlock",
    ),
    "recompile_limit": ScenarioSpec(
        name="recompile_limit",
        script="recompile_limit/train.py",
        description={
            "en": "A multi-task model (12 task heads in turn) trains with a torch.compile'd step that "
                  "takes the task's name as a Python string: each new task fails a guard "
                  "(task == 'task03'), so dynamo recompiles at every step until it reaches its "
                  "recompile limit (8) and runs the step eagerly; TORCH_LOGS=recompiles prints each "
                  "recompilation with its guard. The log keeps moving. Needs torch (backend eager: no "
                  "compiler).",
            "zh": "一个多任务模型（12 个任务头轮流训练）用 torch.compile 编译的训练步骤，把任务名作为 "
                  "Python 字符串传入：每个新任务都会让一个 guard 失败（task == 'task03'），于是 dynamo "
                  "每一步都重新编译，直到达到重新编译上限（8）后改用 eager 执行；TORCH_LOGS=recompiles "
                  "会打印每次重新编译及其 guard。日志一直在推进。"
                  "需要 torch（backend 为 eager：不需要编译器）。",
        },
        taxonomy="perf.host-sync",
        requires=("torch",),
        conclusion="slow-training:recompiles",
    ),
    "batch_size_mismatch": ScenarioSpec(
        name="batch_size_mismatch",
        script="batch_size_mismatch/train.py",
        description={
            "en": "A DeepSpeed job written for 8 GPUs (ds_config.json: train_batch_size 16, micro batch "
                  "2, accumulation 1) started with real torchrun on 3 ranks (gloo, CPU): every rank's "
                  "deepspeed.initialize fails with DeepSpeed's own 'train_batch_size is not equal to "
                  "micro_batch_per_gpu * gradient_acc_step * world_size 16 != 2 * 1 * 3'; torchrun "
                  "reports the failed ranks and the job exits 1. Needs torch and deepspeed.",
            "zh": "一个按 8 张 GPU 编写的 DeepSpeed 作业（ds_config.json：train_batch_size 16、"
                  "micro batch 2、梯度累积 1），用真实的 torchrun 以 3 个 rank（gloo，CPU）启动："
                  "每个 rank 的 deepspeed.initialize 都因 DeepSpeed 自己的断言 "
                  "'train_batch_size is not equal to micro_batch_per_gpu * gradient_acc_step * "
                  "world_size 16 != 2 * 1 * 3' 失败；torchrun "
                  "报告失败的 rank，作业以 1 退出。需要 torch 和 deepspeed。",
        },
        taxonomy="launch.world-size",
        severity="critical",
        requires=("torch", "deepspeed"),
        conclusion="ddp-errors:batch-size-mismatch",
    ),
    "stale_extension_lock": ScenarioSpec(
        name="stale_extension_lock",
        script="stale_extension_lock/train.py",
        description={
            "en": "A job JIT-building a C++ op with torch.utils.cpp_extension.load_inline in its own "
                  "TORCH_EXTENSIONS_DIR, where a previous build, killed with SIGKILL after torch's "
                  "FileBaton took the lock, left fused_scale/lock behind: the log stops after \"Using "
                  "... as PyTorch extensions root...\", the job waits in FileBaton.wait forever and no "
                  "compiler runs (none is needed). Needs torch.",
            "zh": "一个在自己的 TORCH_EXTENSIONS_DIR 中用 torch.utils.cpp_extension.load_inline JIT 编译 "
                  "C++ op 的作业；之前的一次编译在 torch 的 FileBaton 创建锁之后被 SIGKILL 杀掉，留下了 "
                  "fused_scale/lock：日志停在 \"Using ... as PyTorch extensions root...\" 之后，作业在 "
                  "FileBaton.wait 中永远等待，没有编译器在运行（也不需要编译器）。需要 torch。",
        },
        taxonomy="launch.environment",
        requires=("torch",),
        conclusion="extension-errors:stale-extension-lock",
    ),
    "oom_other_process": ScenarioSpec(
        name="oom_other_process",
        script="oom_other_process/train.py",
        description={
            "en": "A GPT pretraining job (the cuda_oom job at batch 4, which alone fits an 80 GB GPU) "
                  "dies of CUDA out of memory at its first step because another process holds 70 GiB "
                  "of the device: a stale notebook kernel (python3 -c \"import torch ...\", its own "
                  "session, no RANK) started before the job. PyTorch's message names it: \"Process "
                  "<pid> has 70.00 GiB memory in use.\" The job exits 1; the notebook runs on. Needs "
                  "torch.",
            "zh": "GPT 预训练任务（批量为 4 的 cuda_oom 任务，单独运行时 80 GB 的 GPU 放得下）在第一步就"
                  "因 CUDA 显存不足退出，因为另一个进程占用了 70 GiB 显存：一个在任务之前启动、被遗忘的 "
                  "notebook 内核（python3 -c \"import torch ...\"，独立会话，没有 RANK）。PyTorch 的报错"
                  "指出了它：\"Process <pid> has 70.00 GiB memory in use.\" 任务以状态 1 退出，notebook "
                  "继续运行。需要 torch。",
        },
        taxonomy="oom.gpu",
        requires=("torch",),
        conclusion="cuda-oom:gpu-held-by-other-process",
        bystander="oom_other_process/stale_notebook.py",
    ),
    "thread_limit": ScenarioSpec(
        name="thread_limit",
        script="thread_limit/train.py",
        description={
            "en": "A data job under a real limit on tasks (as root: pids.max 64 in a pids cgroup of its "
                  "own, else RLIMIT_NPROC as the user nobody; as a user: RLIMIT_NPROC) starts a reader "
                  "thread per shard until CPython raises \"RuntimeError: can't start new thread\"; the "
                  "main thread ends and the process stays, holding its 64 threads. Standard library only.",
            "zh": "一个处于真实任务数限制下的数据作业（root 时：在自己的 pids cgroup 中设 pids.max 为 64，"
                  "否则以 nobody 用户设 RLIMIT_NPROC；普通用户：RLIMIT_NPROC）为每个分片启动一个读取线程，"
                  "直到 CPython 抛出 \"RuntimeError: can't start new thread\"；主线程结束，进程仍在，"
                  "占着它的 64 个线程。只用标准库。",
        },
        taxonomy="launch.environment",
        conclusion="host-faults:thread-limit",
    ),
    "open_files_limit": ScenarioSpec(
        name="open_files_limit",
        script="open_files_limit/train.py",
        description={
            "en": "A data job under a real ulimit -n of 64 opens every shard of its dataset and keeps "
                  "them open until CPython raises \"OSError: [Errno 24] Too many open files\"; it logs "
                  "the traceback and stays, holding its descriptors. Standard library only.",
            "zh": "一个处于真实 ulimit -n 64 限制下的数据作业打开数据集的每个分片并一直不关闭，直到 CPython "
                  "抛出 \"OSError: [Errno 24] Too many open files\"；它把 traceback 写入日志后继续运行，"
                  "占着已打开的描述符。只用标准库。",
        },
        taxonomy="launch.environment",
        conclusion="host-faults:open-files-limit",
    ),
    "cuda_lib_missing_symbol": ScenarioSpec(
        name="cuda_lib_missing_symbol",
        script="cuda_lib_missing_symbol/train.py",
        description={
            "en": "A driver whose LD_LIBRARY_PATH names an \"older system CUDA\" loads its libcublasLt.so.12 "
                  "(no cublasLtGetVersion) before the site-packages/nvidia wheel's, so the wheel's "
                  "libcublas.so.12 fails: \"OSError: ...libcublas.so.12: undefined symbol: "
                  "cublasLtGetVersion\"; the driver stays up with the old copy mapped. The libraries are "
                  "stand-ins built with cc at start-up (needs a C compiler, no GPU, no torch).",
            "zh": "一个驱动进程的 LD_LIBRARY_PATH 指向一个\"较旧的系统 CUDA\"，它先加载了其中的 "
                  "libcublasLt.so.12（没有 cublasLtGetVersion），而不是 site-packages/nvidia wheel 中的那份，"
                  "于是 wheel 的 libcublas.so.12 加载失败：\"OSError: ...libcublas.so.12: undefined symbol: "
                  "cublasLtGetVersion\"；驱动进程继续运行，旧的那份仍被映射。这些库是启动时用 cc 编译的"
                  "替身（需要 C 编译器，不需要 GPU 和 torch）。",
        },
        taxonomy="launch.environment",
        conclusion="extension-errors:cuda-library-missing-symbol",
    ),
    "ray_long_temp_dir": ScenarioSpec(
        name="ray_long_temp_dir",
        script="ray_long_temp_dir/train.py",
        description={
            "en": "A job on an HPC node whose TMPDIR is its per-job scratch folder "
                  "(DIR/scratch/<user>/slurm_jobdir/<job id>/tmp.node0001) calls ray.init(): Ray's "
                  "temp dir is $TMPDIR/ray, the object store's socket path under its session is longer "
                  "than the 107 bytes AF_UNIX allows, and Ray raises OSError: validate_socket_filename "
                  "failed: AF_UNIX path length cannot exceed 107 bytes. The job exits 1. Needs ray.",
            "zh": "HPC 节点上的一个作业，其 TMPDIR 是每个作业自己的 scratch 目录"
                  "（DIR/scratch/<user>/slurm_jobdir/<作业号>/tmp.node0001），调用 ray.init()：Ray 的临时目录"
                  "为 $TMPDIR/ray，其会话下对象存储的套接字路径超过 AF_UNIX 允许的 107 字节，Ray 抛出 "
                  "OSError: validate_socket_filename failed: AF_UNIX path length cannot exceed 107 bytes。"
                  "作业以状态 1 退出。需要 ray。",
        },
        taxonomy="launch.environment",
        requires=("ray",),
        conclusion="ray-startup:socket-path-too-long",
    ),
    "ray_open_files_limit": ScenarioSpec(
        name="ray_open_files_limit",
        script="ray_open_files_limit/train.py",
        description={
            "en": "A driver started under an open-files limit of 64 (soft and hard, as a node's batch "
                  "shell or container may have it) calls ray.init() and creates 16 actors: the raylet, "
                  "its child, runs out of descriptors while starting their workers (\"Raylet failed to "
                  "accept new connection: Too many open files\"), most actors never start and the driver "
                  "waits forever (\"Waiting for N workers...\"). Needs ray; the raylet spins a core "
                  "while it lasts.",
            "zh": "一个在打开文件数限制为 64（软、硬限制相同，正如某些节点的批处理 shell 或容器那样）"
                  "下启动的 driver 调用 ray.init() 并创建 16 个 actor："
                  "作为其子进程的 raylet 在启动 worker 时耗尽文件描述符"
                  "（\"Raylet failed to accept new connection: Too many open files\"），"
                  "大多数 actor 始终无法启动，driver 一直等待（\"Waiting for N workers...\"）。"
                  "需要 ray；运行期间 raylet 会占满一个核心。",
        },
        taxonomy="launch.environment",
        requires=("ray",),
        conclusion="ray-startup:open-files-limit",
    ),
    # New scenarios: add ScenarioSpec entries just above this line, one str_replace each.
}
