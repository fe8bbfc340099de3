"""`runbook list`: every runbook on the search path.

`command.py` holds `run(args) -> int`, `args.py` its `add_arguments(parser)` (argparse only).
This file stays empty of code: `args.py` is imported through it on every command line.

Named `list_cmd`, not `list`: importing a submodule `list` would bind the name `list` in
`runbook.cli`'s namespace and hide the builtin there.
"""
