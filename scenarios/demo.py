"""`make demo`: start real faulty training jobs, diagnose each with `runbook run`, clean up.

Each scenario is a real process in the failure state (see scenarios/README.md).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scenarios.jobs import Scenario, start

RUNBOOK = str(Path(sys.executable).with_name("runbook"))
BOLD, DIM, RESET = ("\x1b[1m", "\x1b[2m", "\x1b[0m") if sys.stdout.isatty() else ("", "", "")

STEPS = [
    ("loader_accumulating", "Token buffer:", [], 0.0,
     "seed 000: GPU idle, one CPU core at 100%, the loader still filling 65,537 tokens"),
    ("nvidia_smi_hang", "Collecting trajectories", ["--set", "stall_after=3"], 3.5,
     "seed 001: the log stopped at 'Collecting trajectories...' and nvidia-smi hangs"),
    ("healthy", r"(?s)step \d+ \|.*step \d+ \|", [], 0.0, "a healthy job, for contrast"),
]


def say(text: str) -> None:
    print(f"\n{BOLD}{text}{RESET}", flush=True)


def diagnose(job: Scenario, extra: list[str], lang: str) -> int:
    argv = [RUNBOOK, "run", "training-hang", "--set", f"log={job.log}", *extra, "--lang", lang]
    shown = " ".join(shlex.quote(a) for a in argv[1:])
    print(f"{DIM}$ runbook {shown}{RESET}", flush=True)
    env = job.tool_env()
    return subprocess.run(argv, env=env, check=False).returncode


def main() -> int:
    lang = "zh" if os.environ.get("LANG", "").startswith("zh") else "en"
    failures = 0
    with tempfile.TemporaryDirectory(prefix="runbook-demo-") as tmp:
        for name, ready, extra, quiet_s, what in STEPS:
            say(f"▶ {name}: {what}")
            job = start(name, Path(tmp) / name)
            try:
                if not job.wait_for_log(ready, timeout=30):
                    print(f"the {name} job did not get going; its log:\n{job.read_log()}")
                    failures += 1
                    continue
                time.sleep(quiet_s)
                code = diagnose(job, extra, lang)
                print(f"{DIM}(runbook exited {code}){RESET}")
            finally:
                job.stop()
    say("Done: every job was stopped. Try `--lang zh` or `--format json` on your own job.")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
