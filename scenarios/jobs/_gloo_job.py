"""What the one-rank-per-host gloo scenarios (`gloo_*`) share: a rank's set-up, a tiny model
trained data-parallel, and a flight-recorder "watchdog".

Each of those scenarios is one rank of a real torch.distributed job on CPU (gloo), started on
its own host with RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT in its environment, as a
multi-node launcher would; the job process *is* the rank (no launcher process of its own).
A train.py imports it as `scenarios.jobs._gloo_job`, with the repository root on sys.path. Standard
library at import; torch is imported inside the functions.

The flight recorder: with TORCH_FR_BUFFER_SIZE > 0 torch records every collective a process
group issues, gloo's too. NCCL's watchdog dumps that record to `<TORCH_FR_DUMP_TEMP_FILE><rank>`
when a collective times out (TORCH_NCCL_DUMP_ON_TIMEOUT=1); gloo has no such watchdog, so
`Watchdog` plays its part: once a rank has made no progress for `after_s` seconds it writes the
dump (`_dump_fr_trace()`, a pickle, and `_dump_fr_trace_json()` beside it as `.json`) and says
so in the log. It waits on an Event with a timeout: no loop burns a CPU.
"""

import os
import threading
import time
from datetime import timedelta

from scenarios.jobs._helpers import say

GLOO_TIMEOUT = timedelta(hours=1)  # a hang stays a hang while it is diagnosed
WATCHDOG_AFTER_S = 2.0


def rank_env():
    """(rank, world size) from the environment the launcher gave this process."""
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def init(rank, world):
    """init_process_group on gloo from MASTER_ADDR/MASTER_PORT; returns torch.distributed."""
    import torch.distributed as dist

    say(f"rank {rank}/{world} init_process_group(backend=gloo, MASTER_ADDR="
        f"{os.environ.get('MASTER_ADDR')} MASTER_PORT={os.environ.get('MASTER_PORT')}, "
        f"host {os.uname()[1]}, pid {os.getpid()})")
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=GLOO_TIMEOUT)
    say(f"rank {rank} initialised process group (backend=gloo, world_size={world})")
    return dist


class Trainer:
    """A linear model trained data-parallel: one all_reduce of the flat gradient per step."""

    def __init__(self, rank, world):
        import torch

        self.rank, self.world = rank, world
        torch.manual_seed(0)  # the same initial weights on every rank
        self.model = torch.nn.Linear(8, 1)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.05)
        self.gen = torch.Generator().manual_seed(1 + rank)  # each rank its own shard of the data
        self.true_w = torch.arange(8, dtype=torch.float32).unsqueeze(1) / 8

    def batch(self):
        import torch

        x = torch.randn(32, 8, generator=self.gen)
        return x, x @ self.true_w

    def backward(self, x, y):
        """Local forward and backward; returns the loss (a tensor)."""
        import torch

        loss = torch.nn.functional.mse_loss(self.model(x), y)
        self.opt.zero_grad()
        loss.backward()
        return loss

    def flat_grad(self):
        import torch

        return torch.cat([p.grad.reshape(-1) for p in self.model.parameters()])

    def apply(self, flat):
        """Write the averaged flat gradient back and take the optimiser step."""
        flat = flat / self.world
        offset = 0
        for p in self.model.parameters():
            n = p.grad.numel()
            p.grad.copy_(flat[offset:offset + n].reshape(p.grad.shape))
            offset += n
        self.opt.step()


def dump_flight_recorder(rank):
    """Write this rank's flight-recorder dump where NCCL's watchdog would; the path, or None."""
    prefix = os.environ.get("TORCH_FR_DUMP_TEMP_FILE")
    if not prefix:
        return None
    from torch._C._distributed_c10d import _dump_fr_trace, _dump_fr_trace_json

    path = f"{prefix}{rank}"
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    for target, data in ((path, _dump_fr_trace()), (path + ".json", _dump_fr_trace_json())):
        tmp = os.path.join(folder, f".fr-tmp-{rank}-{os.getpid()}")  # outside the prefix's glob
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target)
    return path


class Watchdog(threading.Thread):
    """Dumps the flight recorder once the rank has made no progress for `after_s` seconds."""

    def __init__(self, rank, after_s=WATCHDOG_AFTER_S):
        super().__init__(name="fr-watchdog", daemon=True)
        self.rank, self.after_s = rank, after_s
        self._beat = threading.Event()
        self.start()

    def beat(self):
        """The rank made progress (a step completed)."""
        self._beat.set()

    def run(self):
        while True:
            if self._beat.wait(self.after_s):
                self._beat.clear()
                continue
            try:
                path = dump_flight_recorder(self.rank)
            except Exception as exc:  # noqa: BLE001 - say it in the log, as a watchdog would
                say(f"rank {self.rank}: [watchdog] flight-recorder dump failed: {exc}")
                return
            if path:
                say(f"rank {self.rank}: [watchdog] no progress for {self.after_s:g}s: "
                    f"flight recorder dumped to {path}")
            self._beat.wait()  # dumped once; again only after the rank moves and stops again
            self._beat.clear()


def train_forever(rank, world, speed):
    """Data-parallel training of the tiny model: a step, an all_reduce of its gradients, a line
    in the log, forever (the rendezvous must have completed: `init` first)."""
    import torch.distributed as dist

    trainer = Trainer(rank, world)
    step = 0
    while True:
        x, y = trainer.batch()
        loss = trainer.backward(x, y)
        flat = trainer.flat_grad()
        dist.all_reduce(flat)
        trainer.apply(flat)
        say(f"rank {rank} step {step} loss {loss.item():.4f}")
        step += 1
        time.sleep(0.3 / speed)


def sleep_forever():
    while True:
        time.sleep(3600)
