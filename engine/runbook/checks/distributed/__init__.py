"""Checks of the distributed runtime a job runs on: the torch build and distributed settings
(`torch`, in torch_info.py, with its child-process half `_torch_worker.py`), NCCL's setup
(`nccl`), the Python stacks of the ranks and the collectives they wait in (`stack`), torch's
flight-recorder dumps (`flight_recorder`, read through the plain-data pickle reader
`_fr_pickle.py`), and the Ray cluster (`ray`, in ray_state.py).

Not named `torch/` or `ray/`: a check's child runs `python -c ...`, whose sys.path starts with
the working directory, and from checks/ such a folder would hide the real library."""
