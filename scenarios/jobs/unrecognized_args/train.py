#!/usr/bin/env python3
"""Scenario `unrecognized_args` (seed 002, problem 6): a launch whose command line is rejected.

The training program is a real one: the package `llm/` next to this file, run as
`python -m llm.training.train` (`--help` lists its options). Its argparse parser is built
from the config dataclasses: `--<group>-<name>` options (`--model-hidden-size`,
`--training-epochs`, `--optimization-warmup-steps`, ...) and boolean flags that take no
value, `--<group>-<name>` / `--no-<group>-<name>` (`--model-use-moe`,
`--no-optimization-use-compile`).

This file plays the team's launch script (`set -x; cd <code dir>; python -m
llm.training.train ARGS`): it drops the scenario harness's `--speed S`, prints the
command it runs, puts its own directory first on sys.path (as `cd` there would) and runs
the module with ARGS, the arguments after `--speed S`. With no arguments it uses its
built-in command line, copied from an old README, which gives the boolean flag a value
(`--model-use-moe true`): argparse prints its usage and `train.py: error: unrecognized
arguments: true` and the job exits with status 2 before training starts. Any other wrong
option (e.g. the old name `--lr-warmup 100`) fails the same way; a correct command line
trains (a `step N | epoch E/T | loss X | lr Y` line every 20 steps) and exits 0.
"""

from __future__ import annotations

import os
import runpy
import shlex
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MODULE = "llm.training.train"
# The command line of the old launch script: `--model-use-moe true` is how the README of a
# previous version (which took `--model-use-moe {true,false}`) enabled MoE.
BUILTIN_ARGS = [
    "--model-hidden-size", "32", "--model-use-moe", "true", "--model-num-experts", "4",
    "--training-epochs", "3", "--training-batch-size", "64", "--optimization-lr", "0.5",
]


def strip_speed(argv: list[str]) -> list[str]:
    """The arguments for the program: argv without the harness's first `--speed S`."""
    args = list(argv)
    for i, arg in enumerate(args):
        if arg == "--speed" and i + 1 < len(args):
            return args[:i] + args[i + 2:]
        if arg.startswith("--speed="):
            return args[:i] + args[i + 1:]
    return args


def main() -> None:
    args = strip_speed(sys.argv[1:]) or list(BUILTIN_ARGS)
    sys.stdout.write("+ python -m " + " ".join(shlex.quote(a) for a in [MODULE, *args]) + "\n")
    sys.stdout.flush()
    if HERE not in sys.path:
        sys.path.insert(0, HERE)
    sys.argv = [sys.argv[0], *args]
    # Like `python -m`: sys.argv[0] becomes the module's file, so argparse's prog is train.py.
    runpy.run_module(MODULE, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
