"""One `ssh` client process per node, running the serving probe over its stdin and stdout.

The lines go through the probe pipe every serving-probe client shares (_probe_pipe.py): read
with poll() on ssh's pipes and on the transport's cancel pipe, which close() makes readable.
Here, ssh's exit status is the remote command's, or 255 for ssh's own failures; ending its
input ends the probe on the node (`--stop-at-eof`); killing it drops the connection.
"""

from __future__ import annotations

import subprocess

from runbook.transports._probe_pipe import ProbePipe


class Session(ProbePipe):
    """A node's `ssh` process: requests go in as lines, answers come back as lines."""

    def __init__(self, proc: subprocess.Popen[bytes], cancel_fd: int) -> None:
        super().__init__(proc, cancel_fd)
        self.pid = 0  # the probe's pid on the node (its first line)
