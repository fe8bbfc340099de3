# Scenario oom_other_process: the launcher runs this code as `python3 -c CODE WORKDIR` (full-line
# comments stripped), before the job, in a session of its own and without the job's RANK/MASTER_*
# environment: a notebook kernel someone left running, which loaded a model onto GPU 0 and holds
# it. It registers what it holds in the simulated GPU's process list (WORKDIR/gpu0-processes, see
# cuda_oom/train.py), says so once in its own log, and then idles until it is killed.
import os
import sys
import time

import torch

weights = torch.empty(70 * 2**30, dtype=torch.uint8, device="meta")  # 70 GiB "on cuda:0"
table = os.path.join(sys.argv[1], "gpu0-processes")
os.makedirs(table, exist_ok=True)
entry = os.path.join(table, str(os.getpid()))
with open(entry + ".tmp", "w") as fh:
    fh.write(f"{weights.nbytes}\n")
os.replace(entry + ".tmp", entry)
print(f"[notebook] pid {os.getpid()}: torch {torch.__version__}, "
      f"{weights.nbytes / 2**30:.2f} GiB on GPU 0; idle", flush=True)
while True:
    time.sleep(3600)
