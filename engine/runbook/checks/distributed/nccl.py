"""`nccl`: a training process's NCCL setup: its NCCL_* settings, the libnccl it mapped, /dev/shm,
and the flight recorder's dump files.

All read from /proc, without loading anything: the settings from /proc/PID/environ (only
NCCL_* and TORCH_NCCL_* variables), the libraries from /proc/PID/maps (every libnccl*.so*,
a torch wheel's nvidia/nccl/lib/libnccl.so.2 included; two distinct core libnccl files in one
process is a classic source of hangs and crashes), their version from the file name or from the
"NCCL version X.Y.Z" banner inside the binary (a bounded scan of .rodata, then of the file's
head), /dev/shm as the process sees it (NCCL needs far more than docker's 64 MiB default), and
the files torch's NCCL flight recorder dumped under TORCH_NCCL_DEBUG_INFO_TEMP_FILE.
"""

from __future__ import annotations

import os
import re
import struct
import time
from typing import Any

from runbook.checks import _procfs
from runbook.checks.base import CheckContext
from runbook.checks.distributed import stack
from runbook.checks.host import process

NAME = "nccl"
SUMMARY = {
    "en": "NCCL setup of a training process: NCCL_*/TORCH_NCCL_* settings, libnccl versions mapped "
          "(more than one?), /dev/shm size, flight-recorder dump files",
    "zh": "训练进程的 NCCL 配置：NCCL_*/TORCH_NCCL_* 环境变量、已加载的 libnccl 及其版本（是否不止一个）、"
          "/dev/shm 大小、flight recorder 的转储文件",
}
PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "pid": {"type": ["integer", "string"],
                "description": 'The training process ("" means not given)'},
        "match": {"type": "string",
                  "description": "Regex searched in each process's full command line (first match is used)"},
        "log": process.LOG_PARAM,
    },
    "additionalProperties": False,
}
_LIB_FIELDS = "path, kind (nccl or plugin), version, version_string, version_source (file_name or binary)"
RESULT_FIELDS = {
    "available": {"type": "boolean",
                  "en": "A training process was found and its environment and maps could be read",
                  "zh": "找到了训练进程，并且能读取其环境变量和内存映射"},
    "reason": {"type": "string", "en": "Why the process could not be examined (null when it was)",
               "zh": "无法检查该进程的原因（成功时为 null）"},
    "how": {"type": "string", "en": "How the process was selected: pid, match or auto",
            "zh": "进程的选择方式：pid、match 或 auto"},
    "pid": {"type": "integer", "en": "The process examined (null when none)",
            "zh": "被检查的进程 PID（没有时为 null）"},
    "rank": {"type": "integer", "en": "Its RANK (null when not set)",
             "zh": "该进程的 RANK（未设置时为 null）"},
    "settings": {"type": "object",
                 "en": "The process's NCCL_*, TORCH_NCCL_* and TORCH_FR_* environment variables (no "
                       "others; not NCCL_VERSION, which container images set and NCCL never reads)",
                 "zh": "该进程的 NCCL_*、TORCH_NCCL_* 和 TORCH_FR_* 环境变量（不含其他变量；不含 "
                       "NCCL_VERSION：它由容器镜像设置，NCCL 不读取）"},
    "shm": {"type": "object",
            "en": "/dev/shm as the process sees it: {path, total_mib, free_mib, used_percent} (null if "
                  "unreadable)",
            "zh": "该进程看到的 /dev/shm：{path, total_mib, free_mib, used_percent}（无法读取时为 null）"},
    "shm_too_small": {"type": "boolean",
                      "en": "/dev/shm is under 1024 MiB (docker's default is 64 MiB: run with --shm-size "
                            "or --ipc=host); NCCL's shared-memory transport then fails or hangs",
                      "zh": "/dev/shm 小于 1024 MiB（docker 默认只有 64 MiB：用 --shm-size 或 --ipc=host "
                            "启动）；NCCL 的共享内存传输会因此失败或卡住"},
    "libraries": {"type": "array",
                  "en": f"Every libnccl*.so* mapped into the process: {{{_LIB_FIELDS}}}; plugins are "
                        "libnccl-net/-tuner/-profiler",
                  "zh": f"映射进该进程的所有 libnccl*.so*：{{{_LIB_FIELDS}}}；plugin 指 "
                        "libnccl-net/-tuner/-profiler 插件"},
    "nccl_versions": {"type": "array", "en": "Distinct versions of the core libnccl files mapped, sorted",
                      "zh": "已映射的 libnccl 核心库的不同版本，已排序"},
    "multiple_libraries": {"type": "boolean",
                           "en": "More than one distinct core libnccl file is mapped (e.g. torch's bundled "
                                 "one and a system one)",
                           "zh": "映射了不止一个不同的 libnccl 核心库文件（例如 torch 自带的和系统安装的）"},
    "flight_recorder": {"type": "object",
                        "en": "torch's NCCL flight recorder: {prefix (TORCH_FR_DUMP_TEMP_FILE, or its old "
                              "name TORCH_NCCL_DEBUG_INFO_TEMP_FILE; null when unset), trace_buffer_size "
                              "(TORCH_FR_BUFFER_SIZE or TORCH_NCCL_TRACE_BUFFER_SIZE; 0 = off), "
                              "dump_on_timeout, count}",
                        "zh": "torch 的 NCCL flight recorder：{prefix（TORCH_FR_DUMP_TEMP_FILE，或旧名 "
                              "TORCH_NCCL_DEBUG_INFO_TEMP_FILE；未设置时为 null），trace_buffer_size"
                              "（TORCH_FR_BUFFER_SIZE 或 TORCH_NCCL_TRACE_BUFFER_SIZE；0 表示关闭），"
                              "dump_on_timeout，count}"},
    "dump_files": {"type": "array",
                   "en": "Flight-recorder dump files matching the prefix: {path, size, mtime} (mtime in "
                         "ISO 8601), newest first",
                   "zh": "与前缀匹配的 flight recorder 转储文件：{path, size, mtime}（mtime 为 ISO 8601 "
                         "时间），按时间从新到旧"},
}
DEFAULT_TIMEOUT = 10.0

SHM_MIN_MIB = 1024
SCAN_LIMIT = 64 * 1024 * 1024
_CHUNK = 1024 * 1024
_MIB = 1024 * 1024
_LIB_NAME = re.compile(r"^libnccl[^/]*\.so(\.[0-9][0-9.]*)?$")
_PLUGIN = re.compile(r"^libnccl-(net|tuner|profiler|env)")
_NAME_VERSION = re.compile(r"\.so\.(\d+\.\d+\.\d+)")
_BANNER = re.compile(rb"NCCL version (\d+\.\d+\.\d+)([^\x00\s]{0,40})")
_SETTING_PREFIXES = ("NCCL_", "TORCH_NCCL_", "TORCH_FR_")
# Set by NVIDIA's container images to the NCCL they were built with; NCCL never reads it, and the
# library a process maps can differ (2.28.3 in the variable, 2.28.9 mapped, seen on an H100 node).
_NOT_SETTINGS = frozenset({"NCCL_VERSION"})
# torch 2.11 renamed the flight recorder's variables (TORCH_FR_*) and warns on the old names.
_FR_PREFIX = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
_FR_BUFFER = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")
_DUMPS_MAX = 50


def run(params: dict[str, Any], ctx: CheckContext) -> dict[str, Any]:
    result = _blank()
    how, (selected, _unreadable, reason) = process._select(
        {"pid": params.get("pid"), "match": params.get("match"), "log": params.get("log")})
    result["how"] = how
    entries = [e for e in stack._entries(selected) if e["state"] != "Z"]
    pid = entries[0]["pid"] if entries else None
    result["shm"] = shm_usage(_in_root(pid, "/dev/shm"), "/dev/shm")
    result["shm_too_small"] = bool(result["shm"]) and result["shm"]["total_mib"] < SHM_MIN_MIB
    if pid is None:
        return {**result, "available": False, "reason": reason or "no live process selected"}
    result.update(pid=pid, rank=entries[0]["rank"])
    try:
        env = _procfs.environ(pid)
        mapped = mapped_libraries(pid)
    except OSError as exc:
        return {**result, "available": False,
                "reason": f"cannot read /proc/{pid}: {exc.strerror or exc} (run the probe as the job's "
                          "user or root)"}
    result["settings"] = nccl_settings(env)
    result.update(describe_libraries(pid, mapped, ctx))
    result.update(flight_recorder(pid, env))
    return result


def _blank() -> dict[str, Any]:
    return {
        "available": True, "reason": None, "how": None, "pid": None, "rank": None, "settings": {},
        "shm": None, "shm_too_small": False, "libraries": [], "nccl_versions": [],
        "multiple_libraries": False,
        "flight_recorder": {"prefix": None, "trace_buffer_size": None, "dump_on_timeout": None, "count": 0},
        "dump_files": [],
    }


def nccl_settings(env: dict[str, str]) -> dict[str, str]:
    return {name: env[name] for name in sorted(env)
            if name.startswith(_SETTING_PREFIXES) and name not in _NOT_SETTINGS}


def _in_root(pid: int | None, path: str) -> str:
    """`path` as process `pid` sees it (its mount namespace, via /proc/PID/root) when reachable."""
    if pid is not None:
        candidate = f"/proc/{pid}/root{path}"
        try:
            os.stat(candidate)
            return candidate
        except OSError:
            pass
    return path


# -- /dev/shm ----------------------------------------------------------------------------------


def shm_usage(path: str, shown: str) -> dict[str, Any] | None:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    total = st.f_blocks * st.f_frsize
    free = st.f_bavail * st.f_frsize
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    return {
        "path": shown,
        "total_mib": round(total / _MIB, 1),
        "free_mib": round(free / _MIB, 1),
        "used_percent": round(100.0 * used / total, 1) if total else 0.0,
    }


# -- libraries ---------------------------------------------------------------------------------


def mapped_libraries(pid: int) -> list[tuple[str, str]]:
    """(path, "dev:inode") of each distinct libnccl*.so* file in /proc/PID/maps, in map order."""
    found: dict[str, str] = {}
    with open(f"/proc/{pid}/maps", "rb") as fh:
        for raw in fh:
            parts = raw.decode("utf-8", "replace").split(None, 5)
            if len(parts) < 6:
                continue
            path = parts[5].strip()
            if path.endswith(" (deleted)"):
                path = path[: -len(" (deleted)")]
            if _LIB_NAME.match(os.path.basename(path)) and path not in found:
                found[path] = f"{parts[3]}:{parts[4]}"
    return list(found.items())


def describe_libraries(pid: int, mapped: list[tuple[str, str]], ctx: CheckContext) -> dict[str, Any]:
    libraries = []
    core_files = set()
    versions = set()
    for path, file_id in mapped:
        kind = "plugin" if _PLUGIN.match(os.path.basename(path)) else "nccl"
        entry = {"path": path, "kind": kind, **library_version(_in_root(pid, path), path, ctx)}
        libraries.append(entry)
        if kind == "nccl":
            core_files.add(file_id)
            if entry["version"]:
                versions.add(entry["version"])
    return {"libraries": libraries, "nccl_versions": sorted(versions),
            "multiple_libraries": len(core_files) > 1}


def library_version(readable: str, path: str, ctx: CheckContext) -> dict[str, Any]:
    """version, version_string and version_source of one library file."""
    banner = scan_banner(readable, ctx)
    if banner is not None:
        return {"version": banner[0], "version_string": banner[0] + banner[1], "version_source": "binary"}
    named = _NAME_VERSION.search(os.path.basename(path))
    if named:
        return {"version": named.group(1), "version_string": None, "version_source": "file_name"}
    return {"version": None, "version_string": None, "version_source": None}


def scan_banner(path: str, ctx: CheckContext, limit: int = SCAN_LIMIT) -> tuple[str, str] | None:
    """("2.21.5", "+cuda12.4") from the "NCCL version ..." string in the binary; reads <= `limit` bytes:
    .rodata first (where the string lives), then the file's head."""
    try:
        with open(path, "rb") as fh:
            regions = [*_rodata(fh), (0, limit)]
            budget = limit
            for start, size in regions:
                found, used = _scan(fh, start, min(size, budget), ctx)
                budget -= used
                if found is not None or budget <= 0 or ctx.remaining() <= 0.3:
                    return found
    except OSError:
        return None
    return None


def _scan(fh: Any, start: int, size: int, ctx: CheckContext) -> tuple[tuple[str, str] | None, int]:
    """Search [start, start+size) in chunks (overlapping, so a banner across two is found)."""
    fh.seek(start)
    tail = b""
    used = 0
    while used < size and ctx.remaining() > 0.3:
        chunk = fh.read(min(_CHUNK, size - used))
        if not chunk:
            break
        used += len(chunk)
        match = _BANNER.search(tail + chunk)
        if match:
            return (match.group(1).decode(), match.group(2).decode("ascii", "replace")), used
        tail = chunk[-96:]
    return None, used


def _rodata(fh: Any) -> list[tuple[int, int]]:
    """(offset, size) of the .rodata section of a 64-bit little-endian ELF file ([] otherwise)."""
    head = fh.read(64)
    if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
        return []
    shoff, = struct.unpack_from("<Q", head, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", head, 0x3A)
    if not shoff or shentsize < 64 or not 0 < shnum < 65536 or shstrndx >= shnum:
        return []
    fh.seek(shoff)
    table = fh.read(shentsize * shnum)
    if len(table) < shentsize * shnum:
        return []
    sections = [struct.unpack_from("<IIQQQQ", table, i * shentsize) for i in range(shnum)]
    _, _, _, _, str_off, str_size = sections[shstrndx]
    fh.seek(str_off)
    names = fh.read(min(str_size, 1 << 20))
    for name_off, _type, _flags, _addr, offset, size in sections:
        end = names.find(b"\0", name_off)
        if names[name_off:end] == b".rodata":
            return [(offset, size)]
    return []


# -- flight recorder ---------------------------------------------------------------------------


def flight_recorder(pid: int, env: dict[str, str]) -> dict[str, Any]:
    prefix = next((env[name] for name in _FR_PREFIX if name in env), None)
    buffer = next((name for name in _FR_BUFFER if name in env), _FR_BUFFER[0])
    info = {
        "prefix": prefix,
        "trace_buffer_size": process._env_int(env, buffer),
        "dump_on_timeout": _truthy(env.get("TORCH_NCCL_DUMP_ON_TIMEOUT")),
        "count": 0,
    }
    files = dump_files(pid, prefix) if prefix else []
    info["count"] = len(files)
    return {"flight_recorder": info, "dump_files": files[:_DUMPS_MAX]}


def _truthy(value: str | None) -> bool | None:
    if value is None:
        return None
    return value.strip().lower() in ("1", "true", "yes", "on")


def dump_files(pid: int, prefix: str) -> list[dict[str, Any]]:
    """Files whose path starts with `prefix` (as the process sees them), newest first."""
    folder, stem = os.path.split(prefix)
    folder = folder or "/"
    readable = _in_root(pid, folder)
    try:
        names = [n for n in os.listdir(readable) if n.startswith(stem)]
    except OSError:
        return []
    files = []
    for name in names:
        try:
            st = os.stat(os.path.join(readable, name))
        except OSError:
            continue
        if os.path.isdir(os.path.join(readable, name)):
            continue
        files.append({"path": os.path.join(folder, name), "size": st.st_size, "mtime": _iso(st.st_mtime),
                      "_t": st.st_mtime})
    files.sort(key=lambda f: -f["_t"])
    for entry in files:
        del entry["_t"]
    return files


def _iso(timestamp: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(timestamp))
