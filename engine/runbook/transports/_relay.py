"""The relay a gateway runs for the gateway transport (gateway.py): many nodes' checks over the
one SSH connection from the client to the gateway.

Standard library only: it ships in a zipapp of its own (gateway.relay_bytes) with the probe
pipe and the probe bundle, and runs with the gateway's Python. The gateway reaches its nodes
exactly as the SSH transport does from the client: one `ssh` per node for the whole run (the
gateway's own OpenSSH, its ~/.ssh config, keys and known_hosts, plus the options the client
passes down), running the remote command the client wrote (PID, Python check, bundle check
and copy, then `python BUNDLE --serve --stop-at-eof`). The probe bundle travels inside this
zipapp, so a node gets it from its gateway, once per version.

Lines in (stdin), JSON:
    {"config": {"ssh": [...ssh options], "connect_timeout": s, "fanout": n}}   first
    {"id": 7, "node": "gpu01", "host": "gpu01", "port": 22, "user": "root",
     "script": "...", "request": {...}, "timeout": 30}     (host, port, user, script: on a
                                                            node's first request only; kept)
Lines out (stdout): {"ready": true} once the config is read; then, as each answer arrives,
tagged with the request's id:
    {"id": 7, "line": "<the probe's answer line>"}
    {"id": 7, "timed_out": true}                  no answer within the timeout: probe stopped
    {"id": 7, "failed": "connect|start|copy|check", "code": 255, "stderr": "...",
     "elapsed": 1.2, "where": ["10.0.0.7", 22, "root"]}   the client words the reason
    {"id": 7, "error": "..."}

The end of input (the client closed the connection, Ctrl-C, or the connection died), SIGTERM
or SIGHUP ends every node's input at once (each probe stops its check and exits), then kills
the process group of every `ssh` still running: no probe outlives the relay. Should the relay
itself be SIGKILLed, its `ssh` children see the end of their input and the probes stop too.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import zipfile
from typing import Any

from runbook.transports._probe_pipe import ProbePipe, spawn

KILL_GRACE_S = 0.5  # as the SSH transport: past a check's timeout before the probe is stopped
COPY_TIMEOUT_S = 60.0
EXIT_STATUS_WAIT_S = 3.0
KILL_WAIT_S = 3.0  # at the end: how long the probes of all nodes may take together to stop
PROBE_MEMBER = "probe.pyz"  # the probe bundle, inside the relay's zipapp
_MISSING = object()


class Relay:
    """Sessions to the gateway's nodes, one `ssh` per node, and the requests under way."""

    def __init__(self, config: dict[str, Any], bundle: bytes) -> None:
        self.ssh_options = [str(o) for o in config.get("ssh") or []]
        self.connect_timeout = float(config.get("connect_timeout") or 10.0)
        self.connect_slots = threading.BoundedSemaphore(max(1, int(config.get("fanout") or 64)))
        self.bundle = bundle
        self.sessions: dict[str, ProbePipe] = {}
        self.reach: dict[str, dict[str, Any]] = {}  # node -> host, port, user, script (sent once)
        self.locks: dict[str, threading.Lock] = {}
        self.registry = threading.Lock()
        self.out = threading.Lock()
        self.cancel_r, self.cancel_w = os.pipe()  # readable once the relay stops
        self.closed = False

    def reply(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message) + "\n").encode()
        with self.out, contextlib.suppress(OSError):  # the client is gone: nobody to tell
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()

    def remember(self, message: dict[str, Any]) -> None:
        """Keep how to reach a node, which only its first request carries (read in order here,
        before any thread of a later request can need it)."""
        if "script" in message and "node" in message:
            self.reach[str(message["node"])] = {k: message.get(k) for k in ("host", "port", "user", "script")}

    def handle(self, message: dict[str, Any]) -> None:
        """Answer one request (in a thread of its own; a node's requests come one at a time)."""
        ident = message.get("id")
        try:
            with self._lock(str(message["node"])):
                message = {**message, **self.reach.get(str(message["node"]), {})}
                self.reply({"id": ident, **self._check(message)})
        except Exception as exc:  # one node's surprise must not stop the others
            self.reply({"id": ident, "error": f"relay: {type(exc).__name__}: {exc}"})

    def _lock(self, node: str) -> threading.Lock:
        with self.registry:
            return self.locks.setdefault(node, threading.Lock())

    def _check(self, message: dict[str, Any]) -> dict[str, Any]:
        node = str(message["node"])
        session = self.sessions.get(node)
        if session is not None and (session.ended or session.proc.poll() is not None):
            self._forget(node)
            code = session.exit_code(EXIT_STATUS_WAIT_S)
            session.release()
            if code == 255:
                return self._failed("check", message, session, code)
            session = None
        if session is None:
            session, failure = self._connect(message)
            if session is None:
                return failure
        timeout = float(message.get("timeout") or 30.0)
        payload = json.dumps({**message["request"], "timeout": timeout}).encode() + b"\n"
        line = session.ask(payload, time.monotonic() + timeout + KILL_GRACE_S)
        if line is not None:
            return {"line": line.decode("utf-8", "replace")}
        self._forget(node)
        if not session.ended and not self.closed:  # the check hung: its probe is stopped
            session.end_input()
            if session.exit_code(EXIT_STATUS_WAIT_S) is None:
                session.kill()
            session.release()
            return {"timed_out": True}
        failure = self._failed("check", message, session)
        session.release()
        return failure

    def _connect(self, message: dict[str, Any]) -> tuple[ProbePipe | None, dict[str, Any]]:
        """The node's serving probe, or None and the failure (phase, ssh's status, its stderr)."""
        while not self.connect_slots.acquire(timeout=0.2):  # a fan-out width of handshakes at once
            if self.closed:
                return None, {"error": "relay: stopping"}
        try:
            session = self._start(message)
            with self.registry:
                if self.closed:
                    session.kill()
                    session.release()
                    return None, {"error": "relay: stopping"}
                self.sessions[str(message["node"])] = session
            phase = self._handshake(session)
        finally:
            self.connect_slots.release()
        if phase is None:
            return session, {}
        self._forget(str(message["node"]))
        failure = self._failed(phase, message, session)
        session.kill()
        session.release()
        return None, failure

    def _start(self, message: dict[str, Any]) -> ProbePipe:
        argv = ["ssh", "-T", *self.ssh_options, "-o", "ControlMaster=no", "-o", "ControlPath=none"]
        if message.get("port"):
            argv += ["-p", str(int(message["port"]))]
        if message.get("user"):
            argv += ["-l", str(message["user"])]
        argv += ["--", str(message.get("host") or message["node"]), str(message["script"])]
        return ProbePipe(spawn(argv), self.cancel_r)

    def _handshake(self, session: ProbePipe) -> str | None:
        """As the SSH transport's: None once the probe serves, else the phase that failed."""
        if _expect(session, session.started + self.connect_timeout, lambda x: x.isdigit()) is None:
            return "connect"
        state = _expect(session, time.monotonic() + self.connect_timeout,
                        lambda x: x in (b"present", b"absent"))
        if state == b"absent":
            session.send(self.bundle)
            if _expect(session, time.monotonic() + COPY_TIMEOUT_S, lambda x: x == b"copied") is None:
                return "copy"
        elif state is None:
            return "start"
        return None

    def _failed(self, phase: str, message: dict[str, Any], session: ProbePipe,
                code: Any = _MISSING) -> dict[str, Any]:
        if self.closed:
            return {"error": "relay: stopping"}
        if code is _MISSING:
            code = session.exit_code(EXIT_STATUS_WAIT_S if session.ended else 0)
        return {"failed": phase, "code": code, "stderr": session.stderr_text()[-2000:],
                "elapsed": time.monotonic() - session.started, "where": self._where(message)}

    def _where(self, message: dict[str, Any]) -> list[Any]:
        """(HostName, Port, User) as the gateway's ssh sees the node (`ssh -G`), for the reason."""
        host = str(message.get("host") or message["node"])
        found = {"hostname": host, "port": str(message.get("port") or 22),
                 "user": str(message.get("user") or "")}
        argv = ["ssh", *self.ssh_options, "-G", *(["-p", str(message["port"])] if message.get("port")
                                                   else []),
                *(["-l", str(message["user"])] if message.get("user") else []), "--", host]
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(argv, capture_output=True, text=True, timeout=5,
                                 stdin=subprocess.DEVNULL).stdout
            for line in out.splitlines():
                key, _, value = line.partition(" ")
                if key in found and value:
                    found[key] = value.strip()
        port = int(found["port"]) if found["port"].isdigit() else 22
        return [found["hostname"], port, found["user"]]

    def _forget(self, node: str) -> None:
        with self.registry:
            self.sessions.pop(node, None)

    def stop(self) -> None:
        """End every node's input at once (busy probes kill their check's commands, idle ones
        exit), then kill the ssh of any node that did not let go in time."""
        with self.registry:
            self.closed = True
            sessions = list(self.sessions.values())
            self.sessions.clear()
        with contextlib.suppress(OSError):
            os.write(self.cancel_w, b"x")
        for session in sessions:
            session.end_input()
        deadline = time.monotonic() + KILL_WAIT_S
        for session in sessions:
            if session.exit_code(max(0.0, deadline - time.monotonic())) is None:
                session.kill()


def _expect(session: ProbePipe, deadline: float, wanted: Any) -> bytes | None:
    while (line := session.read_line(deadline)) is not None:
        if wanted(line.strip()):
            return line.strip()
    return None


def _stop_signal(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds main() through its `finally`, which stops the nodes


def main() -> int:
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, _stop_signal)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    with zipfile.ZipFile(sys.argv[0]) as own:
        bundle = own.read(PROBE_MEMBER)
    stdin = sys.stdin.buffer
    first = json.loads(stdin.readline() or b"{}")
    relay = Relay(first.get("config") or {}, bundle)
    relay.reply({"ready": True})
    try:
        for raw in stdin:  # ends when the client closes its end or the connection drops
            try:
                message = json.loads(raw)
            except ValueError:
                continue  # not ours: nothing to answer
            relay.remember(message)
            threading.Thread(target=relay.handle, args=(message,), daemon=True).start()
    finally:
        relay.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
