"""`runbook ssh-masters [--stop]`: the SSH connections runbook keeps open for reuse.

`command.py` holds `run(args) -> int`, `args.py` its `add_arguments(parser)` (argparse only).
This file stays empty of code: `args.py` is imported through it on every command line.
"""
