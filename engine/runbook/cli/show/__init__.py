"""`runbook show ID`: one runbook's whole tree in one language, or as JSON.

`command.py` holds `run(args) -> int`, `args.py` its `add_arguments(parser)` (argparse only).
This file stays empty of code: `args.py` is imported through it on every command line.
"""
