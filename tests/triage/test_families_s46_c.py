"""Message families of session 46 (ddp-errors, host-faults, cuda-oom): accelerate launch refusing to start
because its main process port is taken (accelerate/utils/launch.py, `ConnectionError: Tried to launch
distributed communication on port `N`, but another process is utilizing it`), the raylet's file system
monitor finding the disk under Ray's session directory over its threshold (src/ray/common/
file_system_monitor.cc, `... is over 95% full, available space: ...; capacity: .... Object creation will fail
if spilling is required.`), and Ray's exit detail of a worker that ended on SIGTERM under Kubernetes
(python/ray/_raylet.pyx, `The worker may have exceeded K8s pod memory limits.`, a cause with the SIGTERM
handler's `The process receives a SIGTERM.` after it). Two messages of each family
read to their conclusion, and near misses in similar words that must read otherwise."""

from __future__ import annotations

import pytest

from tests.triage.families import assert_first, assert_near_miss

ACCELERATE_TAIL = (
    " Please specify a different port (such as using the `--main_process_port` flag or specifying a"
    " different `main_process_port` in your config file) and rerun your script. To automatically use the"
    " next open port (on a single node), you can set this to `0`.")

RAY_WORKER_DIED = (
    "(raylet) A worker died or was killed while executing a task by an unexpected system error. To"
    " troubleshoot the problem, check the logs for the dead worker. RayTask ID:"
    " ffffffffffffffff1a2b3c4d5e6f708192a3b4c501000000 Worker ID: 5d1c0e7a9b Node ID: 77aa01bc Worker IP"
    " address: 10.4.2.17 Worker port: 41233 Worker PID: 2210 Worker exit type: SYSTEM_ERROR Worker exit"
    " detail: Worker exits unexpectedly. Worker exits with an exit code None. The worker may have exceeded"
    " K8s pod memory limits.")

# (family, text, conclusion, role)
CASES = [
    ("accelerate-port-taken",
     "Traceback (most recent call last):\n"
     "  File \"/opt/venv/bin/accelerate\", line 8, in <module>\n"
     "    sys.exit(main())\n"
     "  File \"/opt/venv/lib/python3.10/site-packages/accelerate/utils/launch.py\", line 217, in "
     "prepare_multi_gpu_env\n"
     "    raise ConnectionError(\n"
     "ConnectionError: Tried to launch distributed communication on port `29500`, but another process is "
     "utilizing "
     "it." + ACCELERATE_TAIL,
     "ddp-errors:port-in-use", "cause"),
    ("accelerate-port-taken",
     "  File \"/usr/lib/python3/dist-packages/accelerate/utils/launch.py\", line 292, in "
     "prepare_deepspeed_cmd_env\n"
     "    raise ConnectionError(\n"
     "ConnectionError: Tried to launch distributed communication on port `12355`, but another process is "
     "utilizing "
     "it." + ACCELERATE_TAIL + "\n"
     "[12:04:51] ERROR    failed (exitcode: 1) local_rank: 0 (pid: 4410) of binary: /usr/bin/python3",
     "ddp-errors:port-in-use", "cause"),
    ("ray-session-disk-over-threshold",
     "(raylet) [2024-02-02 08:12:38,595 E 1113478 1113510] (raylet) file_system_monitor.cc:111: "
     "/tmp/ray/session_2024-02-02_07-50-38_136817_3697590 is over 95% full, available space: 2376220672; "
     "capacity: 1888426192896. Object creation will fail if spilling is required.",
     "host-faults:disk-full", "knock-on"),
    ("ray-session-disk-over-threshold",
     "Status message: Job entrypoint command failed with exit code 1, last available logs (truncated to "
     "20,000 chars):\n"
     "(raylet) [2025-03-01 10:02:11,004 E 9120 9161] file_system_monitor.cc:116: "
     "/data/ray_tmp/session_latest is "
     "over 95% full, available space: 12.4873 GB; capacity: 3519.1 GB. Object creation will fail if "
     "spilling is "
     "required. [repeated 6x across cluster]",
     "host-faults:disk-full", "knock-on"),
    ("ray-k8s-pod-memory",
     RAY_WORKER_DIED.replace("exit code None. The worker may have exceeded K8s pod memory limits.",
                             "exit code 1. The worker may have exceeded K8s pod memory limits. The process "
                             "receives a SIGTERM."),
     "cuda-oom:container-memory-limit", "cause"),
    ("ray-k8s-pod-memory",
     "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
     "error: The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR\n"
     "Worker exit detail: Worker exits unexpectedly. Worker exits with an exit code 1.\n"
     "The worker may have exceeded K8s pod memory limits. The process receives a SIGTERM.",
     "cuda-oom:container-memory-limit", "cause"),
    # without the SIGTERM handler's text only Ray's guess: first while nothing else speaks
    ("ray-k8s-pod-memory",
     "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit "
     "detail: "
     "Worker exits unexpectedly. Worker exits with an exit code None. The worker may have exceeded K8s "
     "pod memory "
     "limits.",
     "cuda-oom:container-memory-limit", "knock-on"),
]


@pytest.mark.parametrize(("family", "text", "conclusion", "role"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_family_reads_to_its_conclusion(family: str, text: str, conclusion: str, role: str) -> None:
    assert_first(text, family, conclusion, role)


# (family, text, what must not come first, what must come first or None)
NEAR_MISSES = [
    # newer accelerate on one machine only warns and picks a free port itself: no failure
    ("accelerate-port-taken",
     "/opt/venv/lib/python3.11/site-packages/accelerate/utils/launch.py:250: UserWarning: Port `29500` "
     "is already "
     "in use. Accelerate will attempt to launch in a standalone-like mode by finding an open port "
     "automatically "
     "for this session.",
     "ddp-errors:port-in-use", None),
    # the disk warning goes on, and the job's own error later is what stopped it
    ("ray-session-disk-over-threshold",
     "(raylet) [2024-08-13 13:53:27,026 E 85978 86010] (raylet) file_system_monitor.cc:111: "
     "/tmp/ray/session_x "
     "is over 95% full, available space: 232025309184; capacity: 17453327216640. Object creation will "
     "fail if "
     "spilling is required.\n"
     "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total capacity "
     "of "
     "79.10 GiB of which 1.21 GiB is free. Including non-PyTorch memory, this process has 77.88 GiB "
     "memory in use.",
     "host-faults:disk-full", "cuda-oom:oom-batch-or-model"),
    # Ray's guess under Kubernetes (no SIGTERM) after the task's own CUDA OOM: the OOM is the cause
    ("ray-k8s-pod-memory",
     "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB. GPU 3 has a total capacity "
     "of "
     "39.39 GiB of which 812.00 MiB is free. Including non-PyTorch memory, this process has 38.58 GiB "
     "memory in "
     "use.\n" + RAY_WORKER_DIED,
     "cuda-oom:container-memory-limit", "cuda-oom:oom-batch-or-model"),
    # outside Kubernetes Ray's exit detail lists SIGKILL's causes: not a pod's limit
    ("ray-k8s-pod-memory",
     "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit "
     "detail: "
     "Worker unexpectedly exits with a connection error code 2. End of file. There are some potential "
     "root causes. "
     "(1) The process is killed by SIGKILL by OOM killer due to high memory usage. (2) ray stop --force "
     "is called. "
     "(3) The worker is crashed unexpectedly due to SIGSEGV or other unexpected errors.",
     "cuda-oom:container-memory-limit", None),
]


@pytest.mark.parametrize(("family", "text", "not_first", "first"), NEAR_MISSES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_a_near_miss_reads_otherwise(family: str, text: str, not_first: str, first: str | None) -> None:
    assert_near_miss(text, family, not_first, first)
