"""`runbook alerts serve`: the Alertmanager receiver that diagnoses an alert when it fires.

`command.py` holds `run(args) -> int`, `args.py` its `add_arguments(parser)` (argparse only).
This file stays empty of code: `args.py` is imported through it on every command line.

Beside the command: `diagnose.py` turns an alert's run into the arguments of `runbook run` and
runs it through that command's own `diagnose` (the receiver itself is `runbook/alerts/`).
"""
