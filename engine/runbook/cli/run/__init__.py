"""`runbook run ID`: a runbook walked on nodes, every node's conclusion reported.

`command.py` holds `run(args) -> int`, `args.py` its `add_arguments(parser)` (argparse only).
This file stays empty of code: `args.py` is imported through it on every command line.

Beside the command: `slurm_ended.py` (a `--slurm-job` that no longer runs: what Slurm kept,
and its logs triaged). `--set name=value` is typed by run/params.py, which the MCP server shares.
"""
