"""A node's session: the serving probe over its stdin and stdout, through `ssh` or a master.

Either one `ssh` client process per node, or (connections reused, _masters.py) a session
opened on the node's control master, a `MuxProcess` (_mux.py) standing for the process.
The lines go through the probe pipe every serving-probe client shares (_probe_pipe.py): read
with poll() on the pipes and on the transport's cancel pipe, which close() makes readable.
Here, the exit status is the remote command's, or 255 for ssh's own failures (a connection
lost); ending the input ends the probe on the node (`--stop-at-eof`); killing drops the
connection (a process) or closes the session's channel (a master's session).
"""

from __future__ import annotations

import subprocess

from runbook.transports._mux import MuxProcess
from runbook.transports._probe_pipe import ProbePipe


class Session(ProbePipe):
    """A node's `ssh` process or master session: requests go in as lines, answers come back."""

    def __init__(self, proc: subprocess.Popen[bytes] | MuxProcess, cancel_fd: int) -> None:
        super().__init__(proc, cancel_fd)  # type: ignore[arg-type]  # MuxProcess has what it uses
        self.pid = 0  # the probe's pid on the node (its first line)

    def kill(self, term_wait: float = 0.0) -> None:
        if isinstance(self.proc, MuxProcess):  # no process of ours: close the channel
            self.proc.kill()
        else:
            super().kill(term_wait)

    def release(self) -> None:
        super().release()
        if isinstance(self.proc, MuxProcess):
            self.proc.close()
