"""A fixed number of threads running the queued jobs, so that a storm of alerts runs a few
diagnoses at a time, never one per alert. The jobs are on disk too (queue.py): this is only
the order they run in. The threads are daemons: stopping the receiver never waits for a run;
its job stays on disk and runs at the next start."""

from __future__ import annotations

import queue
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any

from runbook.alerts.queue import Job


class Workers:
    def __init__(self, count: int, run: Callable[[Job], Any]) -> None:
        self.count, self._run = max(1, count), run
        self._jobs: queue.Queue[Job | None] = queue.Queue()
        self._lock = threading.Lock()
        self.running: dict[str, Job] = {}
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for i in range(self.count):
            thread = threading.Thread(target=self._loop, name=f"runbook-alerts-{i}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def submit(self, job: Job) -> None:
        self._jobs.put(job)

    def stop(self) -> None:
        """No job starts after this; runs under way go on until the process ends."""
        for _ in self._threads:
            self._jobs.put(None)

    def busy(self) -> list[str]:
        with self._lock:
            return sorted(self.running)

    def _loop(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            with self._lock:
                self.running[job.id] = job
            try:
                self._run(job)
            except Exception:  # the runner answers its own failures; this is a last resort
                traceback.print_exc(file=sys.stderr)
            finally:
                with self._lock:
                    self.running.pop(job.id, None)
