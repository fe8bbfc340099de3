"""`runbook test`: test cases and recorded incidents replayed through each runbook's tree.

`command.py` holds `run(args) -> int`, `args.py` its `add_arguments(parser)` (argparse only).
This file stays empty of code: `args.py` is imported through it on every command line.

Beside the command: `replay_view.py` (`--replay DIR...`, recorded nodes walked again).
"""
