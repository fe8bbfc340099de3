"""The scenario jobs: one folder per job (its `train.py`), the registry that describes them
(registry.py) and the launcher that starts and stops them (launch.py).

Standard library only: the launcher also runs on test-cluster nodes with a bare python3.
"""

from scenarios.jobs.launch import (
    Scenario,
    ScenarioError,
    group_members,
    load,
    start,
    stop_dir,
)
from scenarios.jobs.registry import SCENARIO_ROOT, SCENARIOS, ScenarioSpec

__all__ = ["SCENARIOS", "SCENARIO_ROOT", "Scenario", "ScenarioError", "ScenarioSpec", "group_members",
           "load", "start", "stop_dir"]
