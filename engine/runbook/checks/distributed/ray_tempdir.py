"""`ray_tempdir`: would Ray's AF_UNIX sockets under this temp dir fit the 107-byte limit?

Ray puts its session under the temp dir, `TEMP/session_<date>_<time>_<microseconds>_<pid>`,
and the raylet's and the object store's AF_UNIX sockets in its `sockets/` folder. A socket's
path must fit `sockaddr_un.sun_path`: 108 bytes on Linux with the NUL, so 107; Ray checks it
(`validate_socket_filename failed: AF_UNIX path length cannot exceed 107 bytes: ...`) and
`ray.init` / `ray start` fail. On HPC nodes TMPDIR is often a per-job folder on shared storage
(`/scratch/<user>/slurm_jobdir/<job id>/tmp...`), long enough to hit it.

The temp dir is the one Ray would use (Ray 2.x, `get_default_ray_temp_dir`): `temp_dir` when
given (`ray start --temp-dir`, `ray.init(_temp_dir=...)`), else `$RAY_TMPDIR/ray`, else
`$TMPDIR/ray` (Linux), else `/tmp/ray`, read from the environment of `pid` when given (the
job's, where the probe's own may differ), else the probe's. `socket_path`, the path an error
message printed, is measured as it is and its temp dir read from it. No Ray import.
"""

from __future__ import annotations

import datetime
import os
import re
from typing import Any

from runbook.checks import _procfs
from runbook.checks.base import CheckContext

NAME = "ray_tempdir"
SUMMARY = {
    "en": "Ray's temp dir and the longest AF_UNIX socket path its session would create, against the "
          "107-byte limit",
    "zh": "Ray 的临时目录，以及其会话将创建的最长 AF_UNIX 套接字路径与 107 字节上限的比较",
}
PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "temp_dir": {"type": "string", "default": "",
                     "description": "The temp dir given to Ray (--temp-dir / _temp_dir); \"\": "
                                    "RAY_TMPDIR, TMPDIR or /tmp, each followed by /ray"},
        "socket_path": {"type": "string", "default": "",
                        "description": "A socket path an error printed: measured as it is"},
        "pid": {"type": ["integer", "string"], "default": "",
                "description": "Read RAY_TMPDIR / TMPDIR from this process's environment "
                               "(\"\": the probe's own)"},
        "limit": {"type": "integer", "minimum": 1, "default": 107,
                  "description": "Longest AF_UNIX path in bytes (sun_path less its NUL)"},
    },
    "additionalProperties": False,
}
RESULT_FIELDS = {
    "temp_dir": {"type": "string", "en": "The temp dir Ray uses (its session folders are inside)",
                 "zh": "Ray 使用的临时目录（会话目录在其中）"},
    "temp_dir_bytes": {"type": "integer", "en": "Length of the temp dir in bytes",
                       "zh": "临时目录路径的字节长度"},
    "source": {"type": "string",
               "en": "Where the temp dir came from: temp_dir, RAY_TMPDIR, TMPDIR, default (/tmp) or "
                     "log (the socket path an error printed)",
               "zh": "临时目录的来源：temp_dir、RAY_TMPDIR、TMPDIR、default（/tmp）"
                     "或 log（报错中打印的套接字路径）"},
    "env_of": {"type": "string", "en": "Whose environment was read: pid N, or this probe",
               "zh": "读取了谁的环境变量：pid N，或探针自身"},
    "socket_path": {"type": "string",
                    "en": "The longest socket path (the object store's, with the widest pid), or "
                          "the path the error printed",
                    "zh": "最长的套接字路径（对象存储的套接字，按最宽的 pid 计算），或报错中打印的路径"},
    "socket_path_bytes": {"type": "integer", "en": "Its length in bytes", "zh": "其字节长度"},
    "limit": {"type": "integer", "en": "The limit in bytes (107 on Linux)",
              "zh": "字节上限（Linux 上为 107）"},
    "too_long": {"type": "boolean", "en": "The socket path is longer than the limit",
                 "zh": "套接字路径超过上限"},
    "over_by": {"type": "integer", "en": "Bytes over the limit (0 when it fits)",
                "zh": "超出上限的字节数（未超出时为 0）"},
    "max_temp_dir_bytes": {"type": "integer",
                           "en": "The longest temp dir whose sockets still fit",
                           "zh": "套接字仍能放下时临时目录的最大字节长度"},
}
DEFAULT_TIMEOUT = 5.0

SOCKET = "plasma_store"  # the longest of Ray's socket names (the raylet's is `raylet`)
PID_DIGITS = 7  # Linux's PID_MAX_LIMIT is 4194304: a pid has at most 7 digits on any node
_FROM_ERROR = re.compile(r"^(.*)/session_[^/]+/sockets/[^/]+$")


def run(params: dict[str, Any], ctx: CheckContext) -> dict[str, Any]:
    limit = int(params.get("limit") or 107)
    printed = str(params.get("socket_path") or "").strip().strip("'\"")
    env_of = "this probe"
    if printed:
        match = _FROM_ERROR.match(printed)
        temp_dir, source, path = (match.group(1) if match else os.path.dirname(printed)), "log", printed
    else:
        env, env_of = _environment(params.get("pid"), ctx)
        temp_dir, source = ray_temp_dir(str(params.get("temp_dir") or ""), env)
        path = longest_socket_path(temp_dir, PID_DIGITS)
    size = len(path.encode("utf-8"))
    # what a session adds to the temp dir when its pid is as wide as Linux allows
    overhead = len(longest_socket_path("/", PID_DIGITS).encode("utf-8"))
    return {
        "temp_dir": temp_dir, "temp_dir_bytes": len(temp_dir.encode("utf-8")), "source": source,
        "env_of": env_of, "socket_path": path, "socket_path_bytes": size, "limit": limit,
        "too_long": size > limit, "over_by": max(0, size - limit),
        "max_temp_dir_bytes": max(0, limit - overhead),
    }


def ray_temp_dir(given: str, env: dict[str, str]) -> tuple[str, str]:
    """The temp dir Ray picks (ray._common.utils.get_default_ray_temp_dir) and where it came from."""
    if given:
        return os.path.expanduser(given), "temp_dir"
    for name in ("RAY_TMPDIR", "TMPDIR"):  # Ray reads TMPDIR on Linux only; the probe runs there
        if env.get(name):
            return os.path.join(env[name], "ray"), name
    return "/tmp/ray", "default"


def longest_socket_path(temp_dir: str, pid_digits: int) -> str:
    """The object store's socket path of a session started now by a process with the widest pid."""
    stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S_%f")
    return os.path.join(temp_dir, f"session_{stamp}_{'9' * pid_digits}", "sockets", SOCKET)


def _environment(pid: Any, ctx: CheckContext) -> tuple[dict[str, str], str]:
    if str(pid or "").strip().isdigit():
        try:
            return _procfs.environ(int(pid)), f"pid {int(pid)}"
        except OSError:
            pass  # another user's process, or gone: fall back to the probe's own
    return ctx.env, "this probe"

