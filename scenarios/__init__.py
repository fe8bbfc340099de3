"""Scenarios: small, real, CPU-only training jobs that reproduce field failures.

Standard library only. See README.md, and `python3 -m scenarios --help`.
"""

from scenarios.launch import SCENARIOS, Scenario, ScenarioError, ScenarioSpec, load, start, stop_dir

__all__ = ["SCENARIOS", "Scenario", "ScenarioError", "ScenarioSpec", "load", "start", "stop_dir"]
