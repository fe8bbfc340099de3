"""Scenarios: small, real, CPU-only training jobs that reproduce field failures, and the
test clusters they run on.

    scenarios/jobs/       the jobs (one folder each), their registry and launcher
    scenarios/clusters/   ssh, Slurm and Ray clusters on this machine, one daemon lifecycle
    scenarios/demo.py     `make demo`

Standard library only. See README.md, and `python3 -m scenarios --help`.
"""

from scenarios.jobs import SCENARIOS, Scenario, ScenarioError, ScenarioSpec, load, start, stop_dir

__all__ = ["SCENARIOS", "Scenario", "ScenarioError", "ScenarioSpec", "load", "start", "stop_dir"]
