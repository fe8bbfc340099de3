"""Bilingual building blocks for the synthetic content of the site benchmark (data only).

Every entry is an (English, Chinese) pair written as a translation, so the generated Chinese
reads as Chinese and is never a copy of the English (which `runbook lint` would flag).
Sentence templates take these slots: {c} and {c2} components (English ones are capitalised
where a sentence starts with {C}), {p} a problem, {n} a number, {node} a host name, {env} an
environment setting, {sec} seconds, {rank} a rank.
"""

from __future__ import annotations

Pair = tuple[str, str]

COMPONENTS: list[Pair] = [
    ("the data loader", "数据加载器"),
    ("the tokenizer", "分词器"),
    ("NCCL", "NCCL"),
    ("the NCCL watchdog", "NCCL 看门狗"),
    ("the GPU driver", "GPU 驱动"),
    ("the InfiniBand fabric", "InfiniBand 网络"),
    ("the RoCE network", "RoCE 网络"),
    ("the rank 0 process", "rank 0 进程"),
    ("the rendezvous server", "rendezvous 服务"),
    ("the Ray head node", "Ray 头节点"),
    ("the rollout workers", "rollout worker"),
    ("the checkpoint writer", "检查点写入进程"),
    ("the optimizer state", "优化器状态"),
    ("the learning-rate scheduler", "学习率调度器"),
    ("the MoE router", "MoE 路由器"),
    ("the parquet shards", "parquet 数据分片"),
    ("the shared file system", "共享文件系统"),
    ("/dev/shm", "/dev/shm 共享内存"),
    ("the host memory", "主机内存"),
    ("the PCIe link", "PCIe 链路"),
    ("the NVLink bridge", "NVLink 桥接"),
    ("the job scheduler", "作业调度器"),
    ("the container runtime", "容器运行时"),
    ("the fp16 loss scaler", "fp16 loss scaler"),
    ("the gradient all-reduce", "梯度 all-reduce"),
    ("the weight synchronisation", "权重同步"),
    ("the evaluation loop", "评估循环"),
    ("the logging thread", "日志线程"),
]

COMPONENTS_ONLY: list[Pair] = [("{C}", "{c}"), ("{C} on {node}", "{node} 上的{c}"),
                               ("{C} and {c2}", "{c}和{c2}")]

PROBLEMS: list[Pair] = [
    ("stops responding", "停止响应"),
    ("runs out of memory", "内存耗尽"),
    ("waits forever", "一直等待"),
    ("falls behind its peers", "落后于其他节点"),
    ("reports checksum errors", "报告校验错误"),
    ("times out", "超时"),
    ("produces NaN values", "产生 NaN"),
    ("restarts in a loop", "反复重启"),
    ("slows down after a few hours", "运行几个小时后变慢"),
    ("loses its connection", "连接断开"),
    ("fills the disk", "占满磁盘"),
    ("holds a stale lock", "持有过期的锁"),
]

ENVS: list[str] = [
    "NCCL_DEBUG=INFO", "NCCL_IB_DISABLE=1", "NCCL_SOCKET_IFNAME=eth0", "TORCH_NCCL_ASYNC_ERROR_HANDLING=1",
    "CUDA_LAUNCH_BLOCKING=1", "TORCH_DISTRIBUTED_DEBUG=DETAIL", "NCCL_P2P_DISABLE=1",
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", "RAY_DEDUP_LOGS=0", "OMP_NUM_THREADS=8",
    "TORCH_NCCL_DUMP_ON_TIMEOUT=1", "NCCL_ASYNC_ERROR_HANDLING=1",
]

SENTENCES: list[Pair] = [
    ("{C} {p} on {node} after about {n} steps.", "{node} 上的{c}在大约 {n} 步之后{p}。"),
    ("When {c} {p}, every other rank blocks in the next collective and the job looks hung.",
     "当{c}{p}时，其他所有 rank 都会阻塞在下一次集合通信中，整个作业看起来像是卡住了。"),
    ("Set `{env}` before the next launch so that the log says more about {c}.",
     "下次启动前设置 `{env}`，让日志输出更多关于{c}的信息。"),
    ("On a cluster of {n} nodes this usually shows up first on a single node, then spreads.",
     "在 {n} 个节点的集群上，这通常先出现在单个节点上，然后扩散开来。"),
    ("Compare {c} with {c2}: if both are slow, the cause is shared, not local.",
     "将{c}与{c2}对比：如果两者都慢，原因是共享的，而不是本地的。"),
    ("The watchdog fires after {sec} seconds, which is long enough to hide the first error.",
     "看门狗在 {sec} 秒后触发，这段时间足以掩盖最早的错误。"),
    ("Rank {rank} is usually the first to notice, because it also writes the checkpoints.",
     "rank {rank} 通常最先发现问题，因为它还负责写检查点。"),
    ("Do not restart the whole job before you have saved the log of {node}.",
     "在保存 {node} 的日志之前，不要重启整个作业。"),
    ("Most of the time {c} is not the cause but the first victim of {c2}.",
     "大多数情况下，{c}并不是原因，而是{c2}的第一个受害者。"),
    ("A quick way to confirm it is to run the check again after {sec} seconds and compare.",
     "确认的简单方法是 {sec} 秒后再次运行检查并比较结果。"),
    ("If {c} recovers on its own, note the time: the same pattern tends to come back.",
     "如果{c}自行恢复，请记下时间：同样的情况往往会再次出现。"),
    ("Teams that run {n} GPUs or more see this every few days.",
     "使用 {n} 块以上 GPU 的团队每隔几天就会遇到一次。"),
    ("The fix is cheap, but it changes the state of the node, so it only runs with `--apply`.",
     "修复的代价很小，但会改变节点状态，因此只有加上 `--apply` 才会执行。"),
    ("Look at {c2} as well: it shares the same PCIe switch and power supply.",
     "同时检查{c2}：它与之共用同一个 PCIe 交换机和电源。"),
    ("The error message names {c}, yet the real fault is usually one layer below.",
     "错误信息提到的是{c}，但真正的故障通常在更底层。"),
    ("Keep `{env}` in the job template; it costs nothing when everything works.",
     "将 `{env}` 保留在作业模板中；一切正常时它没有任何开销。"),
    ("After {n} retries the launcher gives up and marks the node as failed.",
     "重试 {n} 次之后，启动器放弃并将该节点标记为失败。"),
    ("In the log this looks like one slow step, but the step time grows by {n} ms every hour.",
     "在日志中这看起来像是某一步变慢，但每小时步长会增加 {n} 毫秒。"),
    ("Ask the owner of {node} before you drain it: other jobs may share it.",
     "在将 {node} 下线之前先询问其负责人：其他作业可能也在使用它。"),
    ("{C} keeps working, but {c2} {p}, and the two are easy to confuse.",
     "{c}仍在工作，但{c2}{p}，两者很容易混淆。"),
    ("Write down which node failed first; the timeouts on the other {n} nodes are only collateral.",
     "记下最先出错的节点；其余 {n} 个节点上的超时只是连带影响。"),
    ("A healthy run spends less than {n} ms per step in {c}; anything above that deserves a look.",
     "健康的训练在{c}上每步耗时不到 {n} 毫秒；超过这个值就值得检查。"),
    ("Nothing in the training code changed, which points at {c} or at {c2}.",
     "训练代码没有任何改动，这说明问题出在{c}或{c2}。"),
    ("Run the same check on every node at once; the odd one out is the suspect.",
     "在所有节点上同时运行同一个检查；与众不同的那个节点就是嫌疑对象。"),
    ("Upgrading {c} fixed it for one team, but only after they had ruled out {c2}.",
     "有个团队升级{c}后解决了问题，但那是在排除了{c2}之后。"),
    ("Expect {sec} seconds of silence in the log before anything is printed.",
     "在输出任何内容之前，日志可能会沉默 {sec} 秒。"),
]

HEADINGS: list[Pair] = [
    ("What it looks like", "现象"),
    ("How to confirm it", "如何确认"),
    ("Why it happens", "原因"),
    ("What to do", "处理方法"),
    ("Telling it apart from {c}", "与{c}的区别"),
    ("Preventing it", "预防"),
    ("Known cases", "已知案例"),
    ("Commands to keep at hand", "常用命令"),
    ("{C} in detail", "{c}详解"),
    ("Reading the log", "阅读日志"),
    ("On a large cluster", "在大规模集群上"),
    ("Checklist", "检查清单"),
    ("When {c} {p}", "当{c}{p}时"),
]

ARTICLE_TITLES: list[Pair] = [
    ("{C}: a field guide", "{c}：排查手册"),
    ("When {c} {p}", "{c}{p}时怎么办"),
    ("Why {c} {p} on large clusters", "为什么{c}在大规模集群上会{p}"),
    ("{C} and {c2}: what fails first", "{c}与{c2}：谁先出问题"),
    ("Notes on {c}", "关于{c}的笔记"),
]

ARTICLE_SUMMARIES: list[Pair] = [
    ("How to recognise that {c} {p}, how to confirm it, and what to do on a running cluster.",
     "如何识别{c}{p}、如何确认，以及在运行中的集群上如何处理。"),
    ("Field notes from incidents where {c} {p}, with the checks and fixes that worked.",
     "来自真实事故的记录：{c}{p}，以及行之有效的检查和修复方法。"),
    ("The symptoms, the causes and the fixes when {c} {p}, and how it differs from {c2}.",
     "{c}{p}时的现象、原因和修复方法，以及与{c2}的区别。"),
]

RUNBOOK_TITLES: list[Pair] = [
    ("{C} {p}", "{c}{p}"),
    ("Training hangs because {c} {p}", "训练卡住：{c}{p}"),
    ("Job fails when {c} {p}", "{c}{p}导致作业失败"),
    ("{C} is slow", "{c}变慢"),
]

RUNBOOK_SUMMARIES: list[Pair] = [
    ("Walks from what people see when {c} {p} to the cause, node by node, and tells {c} apart from "
     "{c2}.",
     "从{c}{p}时看到的现象出发，逐个节点找到原因，并区分{c}与{c2}的问题。"),
    ("Finds out whether {c} or {c2} holds the job back, and what to change before the next launch.",
     "判断是{c}还是{c2}拖住了作业，以及下次启动前需要修改什么。"),
    ("The entry point when {c} {p}: reads the log, looks at the process and the GPUs, and names the "
     "fix.",
     "{c}{p}时的入口：读取日志、查看进程和 GPU，并给出修复方法。"),
]

SYMPTOMS: list[Pair] = [
    ("{C} {p} while the GPUs sit at 0%", "{c}{p}，而 GPU 利用率为 0%"),
    ("The log stops after step {n}", "日志在第 {n} 步之后停止"),
    ("`{env}` shows errors from {c}", "`{env}` 显示{c}报错"),
    ("One node is {n}% slower than the rest", "某个节点比其他节点慢 {n}%"),
    ("The job is killed after {sec} seconds without output", "作业在 {sec} 秒没有输出后被杀掉"),
    ("Loss becomes NaN around step {n}", "损失在第 {n} 步左右变为 NaN"),
    ("{C} {p} right after the checkpoint is loaded", "加载检查点后{c}立即{p}"),
]

CONCLUSION_TITLES: list[Pair] = [
    ("{C} {p}", "{c}{p}"),
    ("{C} {p} on this node only", "仅本节点的{c}{p}"),
    ("{C} {p} because of {c2}", "{c2}导致{c}{p}"),
]

STEP_TITLES: dict[str, list[Pair]] = {
    "process": [("Is the training process running?", "训练进程是否在运行？"),
                ("What is the process doing?", "进程在做什么？")],
    "log": [("Is the log still moving?", "日志是否还在更新？"),
            ("What does the log say last?", "日志最后输出了什么？")],
    "gpu": [("Do the GPUs answer?", "GPU 是否有响应？"),
            ("Are all GPUs healthy?", "所有 GPU 是否正常？")],
    "host": [("Is the host short of memory or disk?", "主机内存或磁盘是否不足？")],
    "system": [("How loaded is the node?", "节点负载如何？")],
    "env": [("Is the NCCL environment set?", "NCCL 环境变量是否已设置？")],
    "file": [("Is the checkpoint there?", "检查点文件是否存在？")],
    "port": [("Is the rendezvous port open?", "rendezvous 端口是否可用？")],
    "command": [("Does the topology look right?", "拓扑是否正常？")],
    "nccl": [("Which NCCL does the process load?", "进程加载了哪个 NCCL？")],
    "network": [("Are the network links up?", "网络链路是否正常？")],
    "stack": [("Where does each rank wait?", "每个 rank 卡在哪里？")],
    "ray": [("Are the Ray actors stuck?", "Ray actor 是否卡住？")],
    "dataset": [("Is the data readable?", "数据是否可读？")],
    "checkpoint": [("Does the checkpoint match the model?", "检查点与模型是否匹配？")],
    "torch": [("Does torch see the expected GPUs?", "torch 是否看到预期数量的 GPU？")],
}

# Per check type: `with:` parameters (they may use the params every generated runbook declares)
# and branch conditions with their notes.
CHECK_WITH: dict[str, dict[str, object]] = {
    "process": {"pid": "{{ params.pid }}", "match": "{{ params.match }}"},
    "log": {"path": "{{ params.log }}", "tail": 40,
            "patterns": {"timeout": "Watchdog caught collective operation timeout",
                         "oom": "CUDA out of memory|OutOfMemoryError",
                         "nan": r"\bloss[\s:=]+(nan|inf)"}},
    "gpu": {"source": "auto", "xid": True},
    "host": {"paths": ["/", "/tmp", "/dev/shm"]},
    "system": {"paths": ["/", "/tmp"]},
    "env": {"pid": "{{ params.pid }}", "names": ["NCCL_*", "CUDA_VISIBLE_DEVICES", "MASTER_*"]},
    "file": {"path": "/checkpoints/*.pt", "min_size": 1024},
    "port": {"port": 29500, "host": "127.0.0.1", "connect_timeout": 2.0},
    "command": {"run": "nvidia-smi topo -m", "match": r"NV\d+"},
    "nccl": {"pid": "{{ params.pid }}", "match": "{{ params.match }}"},
    "network": {"master_port": "{{ params.master_port }}", "connect_timeout": 2.0},
    "stack": {"pid": "{{ params.pid }}", "match": "{{ params.match }}"},
    "ray": {"pending_after": 60, "limit": 200},
    "dataset": {"path": "/data/shards/*.parquet", "sample_rows": 2000},
    "checkpoint": {"path": "/checkpoints/latest", "weights_only": True},
    "torch": {"gpus_per_node": "{{ params.expected_gpus }}", "pid": "{{ params.pid }}"},
}

CONDITIONS: dict[str, list[tuple[str, str, str]]] = {
    "process": [("not result.found", "No training process", "没有训练进程"),
                ("(result.d_state_count or 0) > 0", "A process is stuck in the kernel",
                 "有进程卡在内核态")],
    "log": [("not result.exists", "No log to read", "没有可读的日志"),
            ("(result.patterns.timeout.count or 0) > 0", "The watchdog fired", "看门狗已触发"),
            ("(result.patterns.oom.count or 0) > 0", "Out of memory in the log", "日志中出现显存不足"),
            ("result.age_s > params.stall_after", "The log stopped", "日志已停止更新")],
    "gpu": [("not result.available", "The GPU driver does not answer", "GPU 驱动没有响应"),
            ("79 in (result.xid_codes or [])", "Xid 79: fallen off the bus", "Xid 79：GPU 掉卡"),
            ("params.expected_gpus and (result.count or 0) < params.expected_gpus",
             "Fewer GPUs than expected", "GPU 数量少于预期")],
    "host": [("(result.oom_count or 0) > 0", "The OOM killer ran", "OOM killer 已触发"),
             ("result.disks_full", "A disk is full", "磁盘已满")],
    "system": [("result.cpu_count and result.load_avg and result.load_avg[0] >= result.cpu_count",
                "The CPUs are saturated", "CPU 已满载")],
    "env": [("'NCCL_SOCKET_IFNAME' not in (result.vars or {})", "No socket interface set",
             "未设置网卡接口")],
    "file": [("not result.exists", "No checkpoint", "没有检查点"),
             ("result.empty", "The checkpoint is empty", "检查点为空")],
    "port": [("not result.open", "Nothing listens on the port", "端口上没有监听")],
    "command": [("not result.ok", "The command failed", "命令执行失败"),
                ("not result.matched", "No NVLink in the topology", "拓扑中没有 NVLink")],
    "nccl": [("(result.libraries | length) > 1", "Two NCCL libraries loaded", "加载了两个 NCCL 库")],
    "network": [("(result.ib_down | length) > 0 or (result.down | length) > 0", "A link is down",
                 "有链路断开")],
    "stack": [("'collective' in (result.processes | map(attribute='main_wait') | list)",
               "Ranks wait in a collective", "各 rank 在集合通信中等待"),
              ("'dataloader' in (result.processes | map(attribute='main_wait') | list)",
               "Ranks wait for data", "各 rank 在等待数据")],
    "ray": [("result.actor_init_stuck", "Actors stuck initialising", "actor 卡在初始化"),
            ("result.collect_stuck", "Ray work never returns", "Ray 任务一直不返回")],
    "dataset": [("(result.empty_files or 0) > 0", "Empty shards", "存在空的数据分片")],
    "checkpoint": [("(result.missing_count or 0) > 0 or (result.unexpected_count or 0) > 0",
                    "Keys do not match", "键不匹配"),
                   ("result.corrupt", "The checkpoint is corrupt", "检查点已损坏")],
    "torch": [("result.cuda_available and params.expected_gpus and result.device_count < "
               "params.expected_gpus", "torch sees too few GPUs", "torch 看到的 GPU 太少")],
}

# (title en, title zh, effect, command or None)
FIXES: list[tuple[str, str, str, str | None]] = [
    ("Collect the kernel log", "收集内核日志", "read-only",
     "sudo dmesg -T | grep -iE 'xid|nvrm|oom' | tail -n 50"),
    ("Dump the Python stacks", "导出 Python 堆栈", "read-only", "py-spy dump --pid {{ params.pid }}"),
    ("Turn on NCCL debug output", "打开 NCCL 调试输出", "changes-state",
     "export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET"),
    ("Check the InfiniBand ports", "检查 InfiniBand 端口", "read-only", "ibstat | grep -E 'State|Rate'"),
    ("Drain the node", "将节点下线", "disruptive",
     "scontrol update nodename=$(hostname -s) state=drain reason=runbook"),
    ("Reset the GPU", "重置 GPU", "disruptive", "sudo nvidia-smi -r -i 0"),
    ("Enlarge /dev/shm", "扩大 /dev/shm", "changes-state", "sudo mount -o remount,size=64G /dev/shm"),
    ("Read the last lines of the log", "查看日志的最后几行", "read-only", "tail -n 200 {{ params.log }}"),
    ("See who holds the port", "查看谁占用了端口", "read-only", "ss -ltnp | grep {{ params.master_port }}"),
    ("Compare library versions across nodes", "比较各节点的库版本", "read-only",
     "python -c \"import torch; print(torch.__version__, torch.cuda.nccl.version())\""),
    ("Lower the batch size", "减小批量大小", "changes-state", None),
    ("Restart the job from the last checkpoint", "从最近的检查点重启作业", "disruptive", None),
    ("Clip the gradients", "启用梯度裁剪", "changes-state", None),
    ("Check the free space on the checkpoint volume", "检查检查点所在卷的剩余空间", "read-only",
     "df -h /checkpoints"),
    ("List the Ray actors that are still pending", "列出仍在等待中的 Ray actor", "read-only",
     "ray list actors --filter state=PENDING_CREATION"),
    ("Check that the shards are readable", "检查数据分片是否可读", "read-only",
     "for f in /data/shards/*.parquet; do\n"
     "  python -c 'import sys, pyarrow.parquet as pq; pq.ParquetFile(sys.argv[1])' \"$f\" \\\n"
     "    || echo \"bad: $f\"\n"
     "done"),
]

LOG_LINES: list[str] = [
    "[rank{rank}]:[E ProcessGroupNCCL.cpp:{n}] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum={n}, OpType=ALLREDUCE, NumelIn={n}) ran for {ms} milliseconds before timing out.",
    "NVRM: Xid (PCI:0000:{bus}:00): 79, pid={n}, name=python, GPU has fallen off the bus.",
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate {n} MiB "
    "(GPU {rank}; 79.15 GiB total capacity)",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "Token buffer: {n}/65537",
    "{node}:{n}:{n} [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.{rank}.{bus}<0>",
    "step {n} | loss nan | lr 3.0e-04 | grad_norm inf",
    "ray.exceptions.GetTimeoutError: Get timed out: some object(s) not ready.",
    "RuntimeError: Error(s) in loading state_dict for GPT: Missing key(s) in state_dict: \"lm_head.weight\".",
    "OSError: [Errno 98] Address already in use (port 29500)",
]

CODE_SNIPPETS: list[tuple[str, str]] = [
    ("python", "import torch.distributed as dist\n\n"
               "dist.init_process_group(\"nccl\", timeout=datetime.timedelta(seconds={sec}))\n"
               "rank = dist.get_rank()\nprint(f\"rank {{rank}} ready on {{socket.gethostname()}}\")"),
    ("python", "for step, batch in enumerate(loader):\n    loss = model(batch).loss\n"
               "    if not torch.isfinite(loss):\n"
               "        raise RuntimeError(f\"loss is {{loss}} at step {{step}}\")\n"
               "    loss.backward()\n    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)"),
    ("bash", "srun --nodes={n} --ntasks-per-node=8 \\\n  torchrun --nnodes={n} --nproc-per-node=8 "
             "--rdzv-backend=c10d --rdzv-endpoint=$MASTER_ADDR:29500 train.py"),
    ("bash", "runbook run {rid} --nodes 'gpu[001-0{n2}]' --set log=/logs/train.log"),
    ("yaml", "trainer:\n  micro_batch_size: {rank}\n  grad_clip: 1.0\n  checkpoint_every: {n}\n"
             "data:\n  num_workers: 8\n  prefetch_factor: 2"),
]
