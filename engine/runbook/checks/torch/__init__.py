"""Checks of the training processes' torch: the build and distributed settings (`torch`, in
torch_info.py, with its child-process half `_torch_worker.py`), NCCL's setup (`nccl`), the Python
stacks and the collectives they wait in (`stack`), and the flight recorder's dumps
(`flight_recorder`, read through the plain-data pickle reader `_fr_pickle.py`).

Absolute imports only: `import torch` anywhere still finds the real torch, not this package."""
