"""Message families of session 43's helper segv: a rank ended by a fatal signal of its own native
code (SIGSEGV, SIGILL, SIGFPE) as torchrun, torch.multiprocessing, DeepSpeed, faulthandler, glog, Paddle,
Ray (abseil), the shell, srun, MPI launchers, containers and glibc's heap checks report it
(ddp-errors:rank-native-crash), and a launcher not found where a Slurm task or a container starts it
(slurm-job:launcher-not-found). Two or more messages of each family read to their conclusion, and near misses
in similar words that must read otherwise: SIGKILL stays the OOM killer's, SIGBUS /dev/shm's, SIGABRT and
SIGTERM the knock-ons' or the launcher's. The wordings are the libraries' own (the source file or public
thread is named beside each family)."""

from __future__ import annotations

import pytest

from tests.triage.families import RAY_EXIT_DETAIL, assert_first, assert_near_miss, found

NATIVE = "ddp-errors:rank-native-crash"
MISSING = "slurm-job:launcher-not-found"


# (family, text, conclusion, role of the first match)
CASES = [
    # torch/distributed/elastic/multiprocessing/api.py: the agent's report of the first local rank that failed
    ("torchrun-exitcode",
     "W0521 18:06:31.919000 2915962 site-packages/torch/distributed/elastic/multiprocessing/api.py:897] "
     "Sending "
     "process 2916309 closing signal SIGTERM\n"
     "E0521 18:06:37.491000 2915962 site-packages/torch/distributed/elastic/multiprocessing/api.py:869] "
     "failed "
     "(exitcode: -11) local_rank: 3 (pid: 2916310) of binary: "
     "/home/ma-user/anaconda3/envs/test/bin/python3.10",
     NATIVE, "cause"),
    ("torchrun-exitcode",
     "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -4) local_rank: 0 (pid: 5120) of "
     "binary: /usr/bin/python3",
     NATIVE, "cause"),
    # ... errors/__init__.py's failure summary (`exitcode  : -11 (pid: P)`,
    # `Signal 11 (SIGSEGV) received by PID P`)
    ("elastic-summary",
     "Root Cause (first observed failure):\n"
     "[0]:\n"
     "  time      : 2024-05-21_18:06:37\n"
     "  host      : gpu-node-3\n"
     "  rank      : 3 (local_rank: 3)\n"
     "  exitcode  : -11 (pid: 2916310)\n"
     "  error_file: <N/A>\n"
     "  traceback : Signal 11 (SIGSEGV) received by PID 2916310",
     NATIVE, "cause"),
    ("elastic-summary",
     "  exitcode  : -8 (pid: 77120)\n"
     "  error_file: <N/A>\n"
     "  traceback : Signal 8 (SIGFPE) received by PID 77120",
     NATIVE, "cause"),
    # torch/multiprocessing/spawn.py ProcessExitedException for a process ended by a signal
    ("mp-spawn-signal",
     "torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with signal SIGSEGV",
     NATIVE, "cause"),
    ("mp-spawn-signal",
     "    raise ProcessExitedException(\n"
     "torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with signal SIGILL",
     NATIVE, "cause"),
    # Python's subprocess.CalledProcessError (Lib/subprocess.py `died with %r`)
    ("launcher-return-code",
     "subprocess.CalledProcessError: Command '['torchrun', '--nproc_per_node=8', 'train.py']' died with "
     "<Signals.SIGILL: 4>.",
     NATIVE, "cause"),
    ("launcher-return-code",
     "subprocess.CalledProcessError: Command '['/usr/bin/python3', '-u', 'train.py', '--local_rank=0']' died "
     "with <Signals.SIGSEGV: 11>.",
     NATIVE, "cause"),
    # CPython Modules/faulthandler.c
    ("faulthandler",
     "Fatal Python error: Segmentation fault\n"
     "\n"
     "Current thread 0x00007fd9b8151600 (most recent call first):\n"
     '  File "/home/jean/snn-main/snntorch/spikegen.py", line 362 in rate_conv\n'
     '  File "main.py", line 86 in build_rated_dataset',
     NATIVE, "cause"),
    ("faulthandler",
     "[rank2]: Fatal Python error: Illegal instruction\n"
     "[rank2]: Thread 0x00007f1d2c7fe700 (most recent call first):\n"
     '[rank2]:   File "/opt/conda/lib/python3.10/threading.py", line 320 in wait',
     NATIVE, "cause"),
    # glog src/signalhandler.cc, Paddle's SignalInfo and FatalError lines
    ("glog-signal",
     "*** Aborted at 1566142544 (unix time) try \"date -d @1566142544\" if you are using GNU date ***\n"
     "PC: @     0x7fd600b3eed6 dfaProject\n"
     "*** SIGSEGV (@0x0) received by PID 2374 (TID 0x7fd67ff2c740) from PID 0; stack trace: ***\n"
     "    @     0x7fd67e97c4b0 (unknown)",
     NATIVE, "cause"),
    ("glog-signal",
     "FatalError: `Erroneous arithmetic operation` is detected by the operating system.\n"
     "  [TimeInfo: *** Aborted at 1660893422 (unix time) try \"date -d @1660893422\" if you are using GNU "
     "date ***]\n"
     "  [SignalInfo: *** SIGFPE (@0x7fa513bc2049) received by PID 3171 (TID 0x7fa5cdf56700) from PID "
     "331096137 ***]",
     NATIVE, "cause"),
    ("glog-signal",
     "FatalError: `Segmentation fault` is detected by the operating system.\n"
     "  [SignalInfo: *** SIGSEGV (@0x0) received by PID 812 (TID 0x7f3e2b5fe700) from PID 0 ***]",
     NATIVE, "cause"),
    # abseil's failure_signal_handler.cc in Ray's workers (ray-project/ray#39307, secretflow/secretflow#887),
    # before
    # Ray's own worker-died block that names SIGKILL first
    ("absl-signal",
     "(_RemoteRayLightGBMActor pid=273, ip=10.0.42.93) [2023-09-10 19:51:30,025 E 273 329] logging.cc:361: "
     "*** "
     "SIGSEGV received at time=1694400690 on cpu 0 ***\n"
     "(_RemoteRayLightGBMActor pid=273, ip=10.0.42.93) PC: @     0x7fe3eee63087  (unknown)  "
     "LightGBM::DenseBin<>::ConstructHistogram()",
     NATIVE, "cause"),
    ("absl-signal",
     "(SPURuntime pid=1625248) *** SIGSEGV received at time=1695013707 on cpu 99 ***\n"
     "2023-09-18 13:08:28,906  WARNING worker.py:1851 -- A worker died or was killed while executing a task "
     "by "
     "an unexpected system error. To troubleshoot the problem, check the logs for the dead worker. RayTask "
     "ID: "
     "ffff Worker ID: 3614 Node ID: d97c Worker IP address: 202.112.51.165 Worker port: 43059 Worker PID: "
     "1625248 " + RAY_EXIT_DETAIL,
     NATIVE, "cause"),
    # the shell (bash jobs.c: strsignal + ` (core dumped)`), also right after a progress bar, and srun's task
    # report
    ("shell-signal",
     "[Info: Device_0: train_Ep_11: loss: 4.38811e+02; avg_loss: 4.53619e+02]:  20%|| 11/56 "
     "[00:02<00:08,  5.02it/s]Segmentation fault (core dumped)",
     NATIVE, "cause"),
    ("shell-signal",
     "/var/spool/slurmd/job4411/slurm_script: line 21: 90211 Segmentation fault      (core dumped) python "
     "train.py --config cfg.yaml",
     NATIVE, "cause"),
    ("shell-signal",
     "Loading checkpoint shards: 100%|██████████| 4/4\n"
     "Illegal instruction (core dumped)",
     NATIVE, "cause"),
    ("shell-signal",
     "srun -p RTXA6Kq -n 1 -w node12 python train.py --config "
     "config/s3dis/s3dis_stratified_transformer.yaml\n"
     "srun: error: node12: task 0: Segmentation fault (core dumped)",
     NATIVE, "cause"),
    ("shell-signal",
     "building dataset index...\n"
     "Segmentation fault",
     NATIVE, "cause"),
    # Open MPI's ranks' handler, UCX's handler, MPICH's hydra
    ("mpi-signal",
     "[gpu024:29733:0:29762] Caught signal 11 (Segmentation fault: address not mapped to object at address "
     "0x7fc023b50760)",
     NATIVE, "cause"),
    ("mpi-signal",
     "[drossetti-ivy4:07215] *** Process received signal ***\n"
     "[drossetti-ivy4:07215] Signal: Segmentation fault (11)\n"
     "[drossetti-ivy4:07215] Signal code: Address not mapped (1)",
     NATIVE, "cause"),
    ("mpi-signal",
     "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n"
     "=   PID 2671 RUNNING AT master-node00\n"
     "=   EXIT CODE: 139\n"
     "=   CLEANING UP REMAINING PROCESSES\n"
     "YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Segmentation fault (signal 11)",
     NATIVE, "cause"),
    # 128 + 11 as containers, schedulers and IDEs report it
    ("exit-139",
     "Process finished with exit code 139 (interrupted by signal 11: SIGSEGV)",
     NATIVE, "cause"),
    ("exit-139",
     "trainer-1 exited with code 139",
     NATIVE, "cause"),
    # glibc malloc/malloc.c malloc_printerr
    ("glibc-heap",
     "double free or corruption (!prev)\n"
     "Aborted (core dumped)",
     NATIVE, "cause"),
    ("glibc-heap",
     "[rank0]:[W reducer.cpp:1389] Warning: find_unused_parameters=True was specified\n"
     "free(): invalid pointer",
     NATIVE, "cause"),
    # slurmstepd task.c: execve of the task's command (CSCfi/pytorch-ddp-examples#1,
    # huggingface/accelerate#2192)
    ("slurmstepd-execve",
     "The following have been reloaded with a version change:\n"
     "  1) gcc/11.2.0 => gcc/9.4.0\n"
     "\n"
     "slurmstepd: error: execve(): torchrun: No such file or directory\n"
     "srun: error: g1301: task 0: Exited with exit code 2\n"
     "srun: launch/slurm: _step_signal: Terminating StepId=3022331.0",
     MISSING, "cause"),
    ("slurmstepd-execve",
     "slurmstepd: error: execve(): accelerate: No such file or directory\n"
     "srun: error: cdr2601: task 1: Exited with exit code 2\n"
     "srun: Terminating StepId=19389846.0",
     MISSING, "cause"),
    ("slurmstepd-execve",
     "slurmstepd: error: execve(): bad interpreter(/scratch/old/venv/bin/python3): No such file or directory",
     MISSING, "cause"),
    # srun's own lookup (NVIDIA/pyxis#104) and enroot's inside a pyxis container (NVIDIA/pyxis#61)
    ("srun-enroot",
     "srun: fatal: Can not execute torchrun",
     MISSING, "cause"),
    ("srun-enroot",
     "slurmstepd: error: pyxis: container start failed with error code: 1\n"
     "slurmstepd: error: pyxis: printing contents of log file ...\n"
     "slurmstepd: error: pyxis:     enroot-switchroot: failed to execute: torchrun: No such file or "
     "directory",
     MISSING, "cause"),
    # bash execute_cmd.c (HIT-SCIR/Chinese-Mixtral-8x7B#23; FlagAI-Open/FlagAI#553 in a zh_CN locale)
    ("shell-not-found",
     "/var/spool/slurmd/job00088/slurm_script: line 14: deepspeed: command not found",
     MISSING, "cause"),
    ("shell-not-found",
     "scripts/train-pt.sh: line 31: torchrun: command not found",
     MISSING, "cause"),
    ("shell-not-found",
     "[INFO] bmtrain_mgpu.sh: hostfile configfile model_name exp_name exp_version\n"
     "bmtrain_mgpu.sh: 行 84: torchrun：未找到命令",
     MISSING, "cause"),
    # dash (hiyouga/LlamaFactory#5216, AndyJZhao/GLEM#11) and zsh
    ("shell-not-found",
     "08/20/2024 19:04:44 - INFO - llamafactory.cli - Initializing distributed tasks at: 10.188.240.13:2951\n"
     "/bin/sh: 1: torchrun: not found",
     MISSING, "cause"),
    ("shell-not-found",
     "sh: 1: /home/gyn/miniconda/envs/ct/bin/torchrun: not found",
     MISSING, "cause"),
    ("shell-not-found",
     "zsh: command not found: torchrun",
     MISSING, "cause"),
    ("shell-not-found",
     "/bin/bash: /home/u/proj/.venv/bin/torchrun: /builds/ci/.venv/bin/python3: bad interpreter: No such "
     "file or "
     "directory",
     MISSING, "cause"),
    # Go os/exec as runc, docker and Apptainer report it
    ("container-path",
     "docker: Error response from daemon: failed to create task for container: failed to create shim task: "
     "OCI "
     "runtime create failed: runc create failed: unable to start container process: exec: \"torchrun\": "
     "executable file not found in $PATH: unknown.",
     MISSING, "cause"),
    ("container-path",
     "FATAL:   \"deepspeed\": executable file not found in $PATH",
     MISSING, "cause"),
    # DeepSpeed's launcher (deepspeed/launcher/launch.py sigkill_handler) and Open MPI's mpirun name the
    # rank's signal: its own native crash
    ("launcher-return-code",
     "[2024-03-02 11:20:04,012] [ERROR] [launch.py:322:sigkill_handler] ['/usr/bin/python3', '-u', "
     "'train.py', '--local_rank=1'] exits with return code = -11",
     NATIVE, "cause"),
    ("mpi-signal",
     "mpirun noticed that process rank 4 with PID 8669 on node host07 exited on signal 11 (Segmentation "
     "fault).",
     NATIVE, "cause"),
]


@pytest.mark.parametrize(("family", "text", "conclusion", "role"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_family_is_read_by_its_words(family: str, text: str, conclusion: str, role: str) -> None:
    assert_first(text, family, conclusion, role)


# (family, text, the conclusion that must not come first, the one that must, or None)
NEAR_MISSES = [
    # SIGKILL from outside stays the OOM killer's
    ("torchrun-exitcode",
     "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 2 (pid: 4410) of "
     "binary: /usr/bin/python3",
     NATIVE, "host-faults:killed-likely-oom"),
    ("elastic-summary",
     "  exitcode  : -9 (pid: 4410)\n"
     "  error_file: <N/A>\n"
     "  traceback : Signal 9 (SIGKILL) received by PID 4410",
     NATIVE, "host-faults:killed-likely-oom"),
    ("exit-139",
     "command terminated with exit code 137",
     NATIVE, "host-faults:killed-likely-oom"),
    ("exit-139",
     "trainer-1 exited with code 137",
     NATIVE, None),
    # SIGBUS stays /dev/shm's
    ("elastic-summary",
     "  exitcode  : -7 (pid: 4410)\n"
     "  error_file: <N/A>\n"
     "  traceback : Signal 7 (SIGBUS) received by PID 4410",
     NATIVE, "cuda-oom:dataloader-shm-exhausted"),
    ("shell-signal",
     "Bus error (core dumped)",
     NATIVE, "cuda-oom:dataloader-shm-exhausted"),
    # SIGTERM and SIGHUP come from outside
    ("elastic-summary",
     "  exitcode  : -15 (pid: 4410)\n"
     "  error_file: <N/A>\n"
     "  traceback : Signal 15 (SIGTERM) received by PID 4410",
     NATIVE, None),
    ("torchrun-exitcode",
     "torch.distributed.elastic.multiprocessing.api.SignalException: Process 792735 got signal: 1",
     NATIVE, "ddp-errors:launcher-signalled"),
    # SIGABRT: NCCL's watchdog aborting a rank after a collective timeout is that timeout's knock-on
    ("torchrun-exitcode",
     "[rank1]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 1] Watchdog caught collective operation timeout: "
     "WorkNCCL(SeqNum=811, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600077 "
     "milliseconds before timing out.\n"
     "Fatal Python error: Aborted\n"
     "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -6) local_rank: 1 (pid: 880) of "
     "binary: /usr/bin/python3",
     NATIVE, None),
    # a rank's own Python error stays the rank that failed first
    ("torchrun-exitcode",
     "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 (pid: 4242) of "
     "binary: /usr/bin/python3",
     NATIVE, "ddp-errors:rank-failed-first"),
    # Ray's worker-died block alone names SIGSEGV only as one of three guesses
    ("absl-signal",
     "The actor is dead because its worker process has died. " + RAY_EXIT_DETAIL,
     NATIVE, "host-faults:killed-likely-oom"),
    # prose about segfaults, not a crash
    ("shell-signal",
     "To debug a Segmentation fault in a worker, set PYTHONFAULTHANDLER=1 before launching.",
     NATIVE, None),
    ("exit-139",
     "INFO step 1390 loss 2.31 exit code 13 reported by the evaluator",
     NATIVE, None),
    # slurmstepd cannot exec the batch script itself (the spool directory, NFS): no launcher is missing
    ("slurmstepd-execve",
     "slurmstepd: error: execve(): /tmp/slurmd/job2997814/slurm_script: No such file or directory",
     MISSING, None),
    ("slurmstepd-execve",
     "slurmstepd: error: execve(): ./run_train.sh: Permission denied",
     MISSING, None),
    # another tool missing, or a Python module missing, is not the launcher
    ("shell-not-found",
     "/var/spool/slurmd/job00088/slurm_script: line 9: nvidia-smi: command not found",
     MISSING, None),
    ("shell-not-found",
     "ModuleNotFoundError: No module named 'torch'",
     MISSING, None),
    ("container-path",
     "docker: Error response from daemon: OCI runtime create failed: exec: \"nvidia-container-cli\": "
     "executable "
     "file not found in $PATH: unknown.",
     MISSING, None),
    # srun's task exit alone is the knock-on of whatever the task's output says
    ("slurmstepd-execve",
     "srun: error: g1301: task 0: Exited with exit code 2",
     MISSING, None),
]


@pytest.mark.parametrize(("family", "text", "not_first", "first"), NEAR_MISSES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_reads_otherwise(family: str, text: str, not_first: str, first: str | None) -> None:
    assert_near_miss(text, family, not_first, first)


def test_the_other_ranks_timeouts_stay_knock_ons_after_a_segfault() -> None:
    """A rank's SIGSEGV comes first; the survivors' watchdog timeouts and the agent's SIGTERM follow."""
    text = (
        "[rank0]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 0] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=4410, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600052 "
        "milliseconds before timing out.\n"
        "W0521 18:06:31.919000 2915962 torch/distributed/elastic/multiprocessing/api.py:897] Sending process "
        "2916309 closing signal SIGTERM\n"
        "E0521 18:06:37.491000 2915962 torch/distributed/elastic/multiprocessing/api.py:869] failed "
        "(exitcode: "
        "-11) local_rank: 3 (pid: 2916310) of binary: /usr/bin/python3\n")
    matches = found(text, "native-crash-knock-ons")
    assert matches[0] == (NATIVE, "cause"), matches
    assert ("ddp-errors:rank-failed-first", "knock-on") in matches, matches
    assert all(role != "cause" for conclusion, role in matches[1:] if conclusion != NATIVE), matches
