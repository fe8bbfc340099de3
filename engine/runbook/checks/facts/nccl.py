"""NCCL's own WARN and INFO lines, and the NCCL errors PyTorch raises.

NCCL prefixes its lines with `host:pid:tid [dev]`; PyTorch raises `NCCL error in: FILE:LINE,
unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3`, then the
`ncclResult_t` name with its meaning, then `Last error:` and the message NCCL last warned.

Facts (None, False or empty where the lines do not say):

- version, cuda_version: `NCCL version 2.19.3+cuda12.3` -> "2.19.3", "12.3" (the last printed)
- error_class: the class in PyTorch's last NCCL error: "unhandled cuda error", "unhandled system
  error", "internal error", "invalid argument", "invalid usage", "remote process exited or there
  was a network error", "operation in progress"
- result: the last `ncclResult_t` name printed (ncclSystemError, ncclInvalidUsage,
  ncclInternalError, ncclRemoteError, ncclUnhandledCudaError, ncclInvalidArgument,
  ncclInProgress), else the one error_class stands for, else the one the first code of NCCL's
  return chain stands for (`NCCL INFO transport/net.cc:515 -> 2`: each function that passes the
  error up prints its file, line and the `ncclResult_t` number)
- error_count: lines with a PyTorch NCCL error (`NCCL error`, `NCCL Error 1:`, `NCCL failure`)
- last_error: the message after the last `Last error:` (same line or the next), cut to 300 chars
- warn_count: `NCCL WARN` lines
- causes: [{cause, line}]: each distinct WARN message, `Call to connect returned ...` or
  `socketPollConnect: connect returned ...` retry and last_error, classified as connection |
  shm | ib | cuda | resource-limit | config | other (the first 20)
- cause_kinds: the distinct causes, sorted
- duplicate_gpu: [{rank, other_rank, device, message}] from `Duplicate GPU detected : rank 1 and
  rank 0 both on CUDA device 60` (device is the PCI bus id NCCL prints, a hex string; message is
  NCCL's own words, `rank 1 and rank 0 both on CUDA device 60`); each rank of a pair prints it,
  and the pair is kept once, in the order first seen
- env: {NCCL_X: value} from `NCCL_X set by environment to value`
- socket_ifname: env's NCCL_SOCKET_IFNAME
- socket_interfaces, bootstrap_interfaces: [{name, addr}] from `NET/Socket : Using [0]eth0:10.0.0.1<0>`
  and `Bootstrap : Using eth0:10.0.0.1<0>`
- ib_devices: [{name, port, link}] from `NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE`
- network: the transport NCCL chose (`Using network IB` -> "IB")
- ib_no_device: `NET/IB : No device found.` was printed
- no_socket_interface: `Bootstrap : no socket interface found` or `No socket interface found`
- hosts, pids: distinct hosts and pids of the `host:pid:tid [dev]` prefixes (sorted, first 20)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from runbook.checks.facts._text import MAX_ITEMS, MAX_TEXT, add_once, clipped, strip_prefixes

CLASSES = {
    "unhandled cuda error": "ncclUnhandledCudaError",
    "unhandled system error": "ncclSystemError",
    "internal error": "ncclInternalError",
    "invalid argument": "ncclInvalidArgument",
    "invalid usage": "ncclInvalidUsage",
    "remote process exited or there was a network error": "ncclRemoteError",
    "operation in progress": "ncclInProgress",
}
CAUSES = (  # the first whose words occur in a message names its cause
    ("shm", ("shared memory", "/dev/shm", "shm_open")),
    ("ib", ("NET/IB", "ibv_", "ib_plugin", "libibverbs")),
    ("cuda", ("Cuda failure", "CUDA failure", "cuda failure")),
    ("connection", ("onnection refused", "onnection reset", "onnection abort", "onnection closed",
                    "onnection timed out", "Broken pipe", "Connect to", "connect returned",
                    "Network is unreachable", "No route to host", "socketStartConnect",
                    "socketProgress", "Socket recv failed")),
    ("resource-limit", ("nable to allocate", "Cannot allocate memory", "No space left",
                        "Too many open files", "Resource temporarily unavailable")),
    ("config", ("Duplicate GPU", "socket interface found")),
)
_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)(?:\+cuda(\d+\.\d+))?")
_RESULT = re.compile(r"\b(nccl(?:UnhandledCuda|System|Internal|Remote)Error|ncclInvalid(?:Argument|Usage)"
                     r"|ncclInProgress)\b")
_DUPLICATE = re.compile(r"Duplicate GPU detected : rank (\d+) and rank (\d+) both on CUDA device (\w+)")
_ENV = re.compile(r"\b(NCCL_\w+) set by environment to (\S*)")
_SOCKET_USING = re.compile(r"NET/Socket ?: Using (.*)")
_BOOTSTRAP_USING = re.compile(r"Bootstrap ?: Using (.*)")
_IB_USING = re.compile(r"NET/IB\w* ?: Using (.*)")
_NETWORK = re.compile(r"NCCL INFO Using network (\w+)")
_ERROR_MARKS = ("NCCL error", "NCCL Error", "NCCL failure")
# `ncclResult_t`'s numbers, as NCCL's return chain prints them (nccl.h's enum order)
RESULT_NUMBERS = ("ncclSuccess", "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError",
                  "ncclInvalidArgument", "ncclInvalidUsage", "ncclRemoteError", "ncclInProgress")
_CHAIN = re.compile(r"NCCL INFO [\w./-]+\.(?:cc|cu|cpp|c|h):\d+ -> ([1-7])\b")
_PREFIX_SPAN = 256  # characters before " NCCL " searched for the `host:pid:tid [dev]` prefix


def parse(lines: Sequence[str]) -> dict[str, Any] | None:
    """Facts of the NCCL lines in `lines`, or None when there are none."""
    facts = _empty()
    awaiting_last_error = seen = False
    for line in clipped(lines):
        if awaiting_last_error:
            awaiting_last_error = False
            _set_last_error(facts, strip_prefixes(line))
        if not ("NCCL" in line or "nccl" in line or "Last error:" in line or "Duplicate GPU" in line
                or "socket interface found" in line):
            continue
        seen = _read_line(facts, line) or seen
        if "Last error:" in line:
            rest = line.split("Last error:", 1)[1].strip()
            awaiting_last_error = not rest
            _set_last_error(facts, rest)
    if not seen:
        return None
    return _finish(facts)


def _read_line(facts: dict[str, Any], line: str) -> bool:
    """Take what one line says into `facts`; whether it said anything of NCCL's."""
    found = _read_prefix(facts, line)
    if "NCCL WARN" in line:
        facts["warn_count"] += 1
        _add_cause(facts, line.split("NCCL WARN", 1)[1])
        found = True
    elif "connect returned" in line:  # `Call to connect returned`, `socketPollConnect: connect returned`
        _add_cause(facts, line.split("NCCL INFO", 1)[-1])
    elif " -> " in line and facts["chain_result"] is None:
        chain = _CHAIN.search(line)
        if chain:
            facts["chain_result"] = RESULT_NUMBERS[int(chain.group(1))]
            found = True
    if "NCCL error" in line or "NCCL Error" in line or "NCCL failure" in line:
        facts["error_count"] += 1
        facts["error_class"] = _error_class(line) or facts["error_class"]
        found = True
    m = _RESULT.search(line) if "nccl" in line else None
    if m:
        facts["result"] = m.group(1)
        found = True
    return _read_setup(facts, line) or found


def _read_setup(facts: dict[str, Any], line: str) -> bool:
    """Version, environment, interfaces and devices; whether the line gave one."""
    found = False
    for word, pattern, reader in _SETUP_READERS:
        m = pattern.search(line) if word in line else None
        if m:
            reader(facts, m)
            found = True
    if "NET/IB : No device found" in line:
        facts["ib_no_device"] = found = True
    if "o socket interface found" in line:
        facts["no_socket_interface"] = found = True
    return found


def _read_prefix(facts: dict[str, Any], line: str) -> bool:
    """Host and pid from NCCL's `host:pid:tid [dev]` prefix (a source `file.cc:12` may follow)."""
    end = line.find(" NCCL ")
    if end < 0:
        return False
    words = line[max(0, end - _PREFIX_SPAN):end].rsplit(None, 3)
    for i in (len(words) - 1, len(words) - 2):
        dev = words[i] if i >= 1 else ""
        if dev[:1] == "[" and dev[-1:] == "]" and dev[1:-1].isdigit():
            parts = words[i - 1].rsplit(None, 1)[-1].split(":")
            if len(parts) < 3 or not (parts[-3] and parts[-2].isdigit() and parts[-1].isdigit()):
                return False
            add_once(facts["hosts"], parts[-3])
            add_once(facts["pids"], int(parts[-2]))
            return True
    return False


def _error_class(line: str) -> str | None:
    """The class PyTorch's NCCL error names: the known one that comes first after the mark."""
    start = min(i for i in (line.find(mark) for mark in _ERROR_MARKS) if i >= 0)
    rest = line[start:]
    found = [(rest.find(c), c) for c in CLASSES if c in rest]
    return min(found)[1] if found else None


def classify(message: str) -> str:
    """The cause a WARN message or last error points to (see CAUSES)."""
    for cause, words in CAUSES:
        if any(word in message for word in words):
            return cause
    return "other"


def _add_cause(facts: dict[str, Any], message: str) -> None:
    message = message.strip()[:MAX_TEXT]
    if message:
        add_once(facts["causes"], {"cause": classify(message), "line": message})


def _set_last_error(facts: dict[str, Any], text: str) -> None:
    if text and not text.startswith("Exception raised from"):
        facts["last_error"] = text[:MAX_TEXT]
        _add_cause(facts, text)


def _read_version(facts: dict[str, Any], m: re.Match[str]) -> None:
    facts["version"], facts["cuda_version"] = m.group(1), m.group(2) or facts["cuda_version"]


def _read_duplicate(facts: dict[str, Any], m: re.Match[str]) -> None:
    rank, other, device = int(m.group(1)), int(m.group(2)), m.group(3)
    if any({d["rank"], d["other_rank"]} == {rank, other} and d["device"] == device
           for d in facts["duplicate_gpu"]):
        return  # the other rank of the pair said it too
    message = f"rank {rank} and rank {other} both on CUDA device {device}"
    add_once(facts["duplicate_gpu"], {"rank": rank, "other_rank": other, "device": device,
                                      "message": message})


def _read_env(facts: dict[str, Any], m: re.Match[str]) -> None:
    if len(facts["env"]) < MAX_ITEMS or m.group(1) in facts["env"]:
        facts["env"][m.group(1)] = m.group(2).rstrip(".")


def _read_interfaces(key: str) -> Callable[[dict[str, Any], re.Match[str]], None]:
    def read(facts: dict[str, Any], m: re.Match[str]) -> None:
        for word in m.group(1).split()[:MAX_ITEMS]:  # `[0]eth0:10.0.0.1<0>`, or without `[0]`
            name, _, addr = _index_removed(word).partition(":")
            if name and addr.endswith(">") and "<" in addr:
                add_once(facts[key], {"name": name, "addr": addr[:addr.rindex("<")]})
    return read


def _read_ib(facts: dict[str, Any], m: re.Match[str]) -> None:
    for word in m.group(1).split()[:MAX_ITEMS]:  # `[0]mlx5_0:1/IB`
        if not word.startswith("["):
            continue
        name, _, port_link = _index_removed(word).partition(":")
        port, _, link = port_link.partition("/")
        if name and port.isdigit() and link:
            add_once(facts["ib_devices"], {"name": name, "port": int(port), "link": link})


def _index_removed(word: str) -> str:
    """`[0]eth0:...` -> `eth0:...`."""
    if word.startswith("["):
        close = word.find("]")
        if close > 1 and word[1:close].isdigit():
            return word[close + 1:]
    return word


def _read_network(facts: dict[str, Any], m: re.Match[str]) -> None:
    facts["network"] = m.group(1)


_SETUP_READERS = (  # (a word the line must hold, the pattern, what reads the match)
    ("NCCL version", _VERSION, _read_version),
    ("Duplicate GPU", _DUPLICATE, _read_duplicate),
    ("set by environment", _ENV, _read_env),
    ("NET/Socket", _SOCKET_USING, _read_interfaces("socket_interfaces")),
    ("Bootstrap", _BOOTSTRAP_USING, _read_interfaces("bootstrap_interfaces")),
    ("NET/IB", _IB_USING, _read_ib),
    ("Using network", _NETWORK, _read_network),
)


def _empty() -> dict[str, Any]:
    return {
        "version": None, "cuda_version": None, "error_class": None, "result": None, "chain_result": None,
        "error_count": 0, "last_error": None, "warn_count": 0, "causes": [], "cause_kinds": [],
        "duplicate_gpu": [], "env": {}, "socket_ifname": None, "socket_interfaces": [],
        "bootstrap_interfaces": [], "ib_devices": [], "network": None, "ib_no_device": False,
        "no_socket_interface": False, "hosts": [], "pids": [],
    }


def _finish(facts: dict[str, Any]) -> dict[str, Any]:
    if facts["result"] is None and facts["error_class"] is not None:
        facts["result"] = CLASSES[facts["error_class"]]
    chain_result = facts.pop("chain_result")
    if facts["result"] is None:
        facts["result"] = chain_result
    facts["cause_kinds"] = sorted({c["cause"] for c in facts["causes"]})
    facts["socket_ifname"] = facts["env"].get("NCCL_SOCKET_IFNAME")
    facts["hosts"] = sorted(facts["hosts"])
    facts["pids"] = sorted(facts["pids"])
    return facts
