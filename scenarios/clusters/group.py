"""The lifecycle every test cluster shares: its daemons started together, stopped together.

`DaemonGroup` is the base of `Cluster` (ssh.py), `SlurmCluster` (slurm.py) and `RayCluster`
(ray.py). A subclass says which daemons it has (`daemons()`), how it boots them (`_boot()`)
and what its state file holds (`to_json()`); the base does the rest, once for all:

* `_start(attempt, attempts)`: builds and boots a group, again on fresh ports when a daemon
  could not bind its own (`retry_on`), with nothing left of a failed try; an `atexit` hook
  stops the group should its owner forget; `startup_s` records how long it took;
* the state file `BASE/<state_file>` (`to_json()`, which names every daemon's pids), so that
  `down(BASE)` can kill the daemons of a cluster whose owner was itself killed;
* `pids()`, `stop()` (idempotent and thread-safe; every daemon killed at once, every wait
  bounded; scratch directories removed) and the context manager.

cli.py gives each cluster its `up` and `down` commands.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, TypeVar

from scenarios.clusters.daemon import (
    KILL_WAIT_S,
    Daemon,
    DaemonError,
    PortTaken,
    kill_recorded,
    stop_all,
)

G = TypeVar("G", bound="DaemonGroup")


class DaemonGroup:
    """The daemons of one test cluster, under one base directory (None: no files of ours)."""

    state_file: ClassVar[str | None] = None  # BASE/<state_file>: what `down` kills
    error: ClassVar[type[DaemonError]] = DaemonError  # what the subclass's start raises
    retry_on: ClassVar[tuple[type[BaseException], ...]] = (PortTaken,)  # start again on these
    what: ClassVar[str] = "the cluster"  # for messages

    def __init__(self, base: Path | None) -> None:
        self.base = base
        self.startup_s = 0.0
        self.scratch: list[Path] = []  # directories outside base, removed at stop
        self._lock = threading.Lock()
        self._stopped = False

    # -- what a subclass says ---------------------------------------------------------

    def daemons(self) -> list[Daemon]:
        """Every daemon of the group (started or not yet)."""
        raise NotImplementedError

    def _boot(self) -> None:
        """Start every daemon and wait until the group is ready; raise if it is not."""
        raise NotImplementedError

    def _shutdown(self) -> None:
        """What to do before the daemons are killed (Ray asks its nodes to stop first)."""

    def to_json(self) -> dict[str, Any]:
        """The state file: what the subclass records, and `lifecycle_json()`."""
        return self.lifecycle_json()

    # -- starting ---------------------------------------------------------------------

    @classmethod
    def _start(cls: type[G], attempt: Callable[[], G], attempts: int) -> G:
        """Build a group with `attempt()` and boot it, up to `attempts` times while a try
        fails with one of `retry_on`; each failed try is stopped, nothing of it left.
        Errors come out as the subclass's `error`."""
        t0 = time.monotonic()
        last: BaseException | None = None
        for _ in range(max(1, attempts)):
            group: G | None = None
            try:
                group = attempt()
                atexit.register(group.stop)
                group._boot()
            except cls.retry_on as exc:
                last = exc
            except DaemonError as exc:
                cls._stop_quietly(group)
                if isinstance(exc, cls.error):
                    raise
                raise cls.error(str(exc)) from exc
            except BaseException:
                cls._stop_quietly(group)
                raise
            else:
                group.startup_s = time.monotonic() - t0
                group.write_state()
                return group
            cls._stop_quietly(group)
        raise cls.error(f"could not start {cls.what}: {last}") from last

    @staticmethod
    def _stop_quietly(group: DaemonGroup | None) -> None:
        if group is not None:
            group.stop()

    # -- information ------------------------------------------------------------------

    def lifecycle_json(self) -> dict[str, Any]:
        """What every state file holds: the daemons' pids, the scratch directories."""
        return {"base": str(self.base or ""), "startup_s": round(self.startup_s, 3),
                "manager_pid": os.getpid(), "daemons": [d.to_json() for d in self.daemons()],
                "scratch": [str(p) for p in self.scratch]}

    def write_state(self) -> None:
        """Write `to_json()` to BASE/<state_file> (atomically), when the group has one."""
        if self.base is None or self.state_file is None:
            return
        tmp = self.base / (self.state_file + ".tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=2) + "\n")
        tmp.replace(self.base / self.state_file)

    def pids(self) -> list[int]:
        """Every live process of the group's daemons. Empty after stop()."""
        return sorted({pid for daemon in self.daemons() for pid in daemon.pids()})

    # -- stopping ---------------------------------------------------------------------

    def stop(self, remove: bool = False, wait: float = KILL_WAIT_S) -> bool:
        """Kill every daemon and everything it started (idempotent), remove the scratch
        directories; files under base stay unless remove=True. True if nothing is left."""
        with self._lock:
            ok = True
            if not self._stopped:
                self._stopped = True
                self._shutdown()
                ok = stop_all(self.daemons(), wait)
                ok = not self.pids() and ok
                atexit.unregister(self.stop)
                for path in self.scratch:
                    shutil.rmtree(path, ignore_errors=True)
            if remove and self.base is not None:
                shutil.rmtree(self.base, ignore_errors=True)
            return ok

    def __enter__(self: G) -> G:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def down(base: Path | str, state_file: str, wait: float = KILL_WAIT_S) -> int:
    """Kill the daemons recorded in BASE/<state_file> (for when the process that started them
    was itself killed): every pid it records, each namespace's pid 1 with every process in its
    namespace, but only pids whose command line still names BASE. Removes the scratch
    directories. Returns how many were killed."""
    state = json.loads((Path(base) / state_file).read_text())
    killed = kill_recorded(_recorded_pids(state), state["base"], wait)
    for path in state.get("scratch", []):
        shutil.rmtree(path, ignore_errors=True)
    return killed


def _recorded_pids(state: Any) -> list[int]:
    """Every pid a state file records (`pid`, `ns_init_pid`, `unshare_pid`, `munged_pid`... at
    any depth; not `manager_pid`), once each: the layout of an older state file works too."""
    found: dict[int, None] = {}
    todo = [state]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                if key.endswith("pid") and key != "manager_pid" and isinstance(value, int):
                    found[value] = None
                else:
                    todo.append(value)
        elif isinstance(item, list):
            todo.extend(item)
    return [pid for pid in found if pid > 0]
