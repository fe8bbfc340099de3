#!/usr/bin/env python3
"""Scenario `data_generation_stuck` (seed 004): a GKD job stuck generating its train split.

Stands for `python main_gkd.py ...` (verl-style GKD on-policy distillation, CPU only,
standard library only). The driver (this process) starts its TaskRunner, a child
process, and waits for it, as the driver waits in `ray.get(runner.run.remote())`; it
relays the TaskRunner's stdout and stderr to its own stdout prefixed with
`(TaskRunner pid=N) `, as Ray's log monitor does for an actor's output.

The TaskRunner builds the training dataset like `datasets.load_dataset("json",
data_files=...)`: it resolves the data files, prints tqdm's first progress line
`Generating train split: 0 examples [00:00, ? examples/s]` and opens the first data file
to read its examples. That file, `DIR/data/gkd/train.jsonl`, is a named pipe (a FIFO,
as left by a streaming "decompress / download into a pipe" staging step) that no process
ever opens for writing, so `open()` blocks in the kernel (wchan `wait_for_partner`)
forever: the TaskRunner sleeps (state S) with no CPU, the driver sleeps waiting for it,
and the log never moves past the progress line. The FIFO is created at start (an
existing regular file of that name is replaced).

Both processes are in the job's process group; the TaskRunner also gets
PR_SET_PDEATHSIG=SIGKILL, and its comm is `TaskRunner`.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import stat
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scenarios/jobs/
from _helpers import die_with_parent as _die_with_parent  # noqa: E402
from _helpers import set_comm as _set_comm

CONFIG = {
    "data": {"train_files": "data/gkd/train.jsonl", "prompt_key": "prompt",
             "max_prompt_length": 512, "train_batch_size": 8},
    "actor_rollout_ref": {"model": {"path": "Qwen/Qwen2.5-0.5B-Instruct"},
                          "rollout": {"name": "vllm", "n": 1}},
    "teacher": {"model": {"path": "Qwen/Qwen2.5-7B-Instruct"}},
    "trainer": {"n_gpus_per_node": 4, "nnodes": 1, "total_epochs": 1, "project_name": "gkd"},
    "rollout": {"n_gpus_per_node": 4},
}


def say(message: str, stream=None) -> None:
    out = stream or sys.stdout
    out.write(message + "\n")
    out.flush()


# ---------------------------------------------------------------------- TaskRunner (child)


class JsonBuilder:
    """The steps of `datasets`' packaged json builder that matter here."""

    def __init__(self, data_files: list[str]) -> None:
        self.data_files = data_files

    def download_and_prepare(self) -> None:
        self._prepare_split("train")

    def _prepare_split(self, split: str) -> None:
        # tqdm's first refresh: carriage return, no newline (stderr is not a terminal).
        sys.stderr.write(f"\rGenerating {split} split: 0 examples [00:00, ? examples/s]")
        sys.stderr.flush()
        examples = 0
        for _ in self._generate_tables():
            examples += 1  # never reached
        sys.stderr.write(f"\rGenerating {split} split: {examples} examples\n")

    def _generate_tables(self):
        for path in self.data_files:
            with open(path, "rb") as fh:  # a FIFO without a writer: blocks here, forever
                for line in fh:
                    yield json.loads(line)


def load_dataset(builder: str, data_files: list[str]) -> JsonBuilder:
    dataset = JsonBuilder(data_files)
    dataset.download_and_prepare()
    return dataset


def create_rl_dataset(data_files: list[str]) -> JsonBuilder:
    say("Using dataset class: RLHFDataset")
    say(f"dataset files: {data_files}")
    return load_dataset("json", data_files=data_files)


def task_runner(config: dict) -> int:
    _die_with_parent()
    _set_comm("TaskRunner")
    say(f"TaskRunner hostname: {socket.gethostname()}, PID: {os.getpid()}")
    say(json.dumps(config, sort_keys=True))
    data_files = [os.path.abspath(config["data"]["train_files"])]
    create_rl_dataset(data_files)
    say("dataset len: 0")  # never reached
    return 0


# ---------------------------------------------------------------------- driver (main_gkd)


def make_fifo(path: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        if stat.S_ISFIFO(os.stat(path).st_mode):
            return
        os.remove(path)
    except FileNotFoundError:
        pass
    os.mkfifo(path, 0o644)


def relay(fd: int, prefix: str) -> None:
    """Forward the TaskRunner's output line by line, prefixed (\\r ends a line too, as tqdm's
    refreshes reach the driver's log one per line)."""
    pending = b""
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        pending += chunk
        parts = pending.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        pending = parts.pop()
        # A progress line that is not followed by a newline is shown as it is, like Ray
        # shows a partial last line of a worker's log.
        if pending and pending.startswith(b"Generating "):
            parts.append(pending)
            pending = b""
        for part in parts:
            if part:
                say(prefix + part.decode("utf-8", "replace"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--speed", type=float, default=1.0, help="accepted for uniformity; unused")
    ap.add_argument("--role", choices=("driver", "task-runner"), default="driver",
                    help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.role == "task-runner":
        return task_runner(CONFIG)

    say("[main_gkd] config: data.train_files=data/gkd/train.jsonl trainer.n_gpus_per_node=4 "
        "rollout.n_gpus_per_node=4 (cpu reproduction: no GPU, no Ray)")
    make_fifo(os.path.abspath(CONFIG["data"]["train_files"]))
    say("[main_gkd] starting TaskRunner")
    read_fd, write_fd = os.pipe()
    runner = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--speed", f"{args.speed:g}",
         "--role", "task-runner"],
        stdin=subprocess.DEVNULL, stdout=write_fd, stderr=write_fd, close_fds=True)
    os.close(write_fd)
    prefix = f"(TaskRunner pid={runner.pid}) "
    relayer = threading.Thread(target=relay, args=(read_fd, prefix), name="log-monitor", daemon=True)
    relayer.start()
    code = runner.wait()  # the driver's ray.get(runner.run.remote()): never returns
    relayer.join(timeout=5)
    say(f"[main_gkd] TaskRunner exited with status {code}")
    time.sleep(0.1)
    return code


if __name__ == "__main__":
    sys.exit(main())
