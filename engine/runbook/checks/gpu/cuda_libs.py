"""`cuda_libs`: which CUDA libraries a job loads, and does the one it loads define the symbol it needs?

torch's CUDA wheels bring their own libraries (site-packages/nvidia/<lib>/lib/...). A directory
in LD_LIBRARY_PATH (a system CUDA, /usr/local/cuda-12.1/lib64) is searched before the wheels'
RUNPATH, so an older libnvJitLink or libcublasLt found there is loaded instead, and the import
fails with `undefined symbol: __nvJitLinkAddData_12_1` or `cublasLtGetStatusString`. This check
reads the error line for the symbol and the library it belongs to, lists every copy of that
library where the loader would look (LD_LIBRARY_PATH first, then torch's wheels, then the system
directories) and whether each defines the symbol (its .dynsym, read by a small ELF reader), and
for a live process lists the CUDA libraries it maps and flags those outside the wheels' tree.
"""

from __future__ import annotations

import glob
import os
import re
from typing import Any

from runbook.checks import _procfs
from runbook.checks.base import CheckContext
from runbook.checks.gpu import _elf
from runbook.checks.host import process

NAME = "cuda_libs"
SUMMARY = {
    "en": "CUDA libraries a job loads (LD_LIBRARY_PATH, torch's nvidia wheels, the system) and whether "
          "the copy it loads defines the symbol an error names",
    "zh": "作业加载的 CUDA 库（LD_LIBRARY_PATH、torch 的 nvidia wheel、系统目录），以及它加载的那份"
          "是否定义了报错中缺少的符号",
}
PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "error": {"type": "string", "default": "",
                  "description": "The error line (`undefined symbol: X, version libY.so.N`, `symbol X "
                                 "version libY.so.N not defined in file ...`, `Cannot load symbol X`, "
                                 "`cuDNN version incompatibility: ...`)"},
        "symbol": {"type": "string", "default": "", "description": "The symbol (else read from `error`)"},
        "library": {"type": "string", "default": "",
                    "description": "The library's file name, e.g. libnvJitLink.so.12 (else from `error`)"},
        "ld_library_path": {"type": "string",
                            "description": "The job's LD_LIBRARY_PATH (default: the process's, else "
                                           "this environment's)"},
        "site_packages": {"type": "string", "default": "",
                          "description": "The job's site-packages (else from the error's path or the "
                                         "process's maps)"},
        "pid": {"type": ["integer", "string"], "description": 'The training process ("" means not given)'},
        "match": {"type": "string",
                  "description": "Regex searched in each process's full command line (first match is used)"},
        "log": process.LOG_PARAM,
    },
    "additionalProperties": False,
}
_CANDIDATE = "path, source (LD_LIBRARY_PATH, wheel, system or mapped), defines (true, false or null)"
RESULT_FIELDS = {
    "available": {"type": "boolean", "en": "A symbol or a process could be examined",
                  "zh": "能够检查某个符号或某个进程"},
    "reason": {"type": "string", "en": "Why nothing could be examined (null when something was)",
               "zh": "无法检查的原因（能检查时为 null）"},
    "symbol": {"type": "string", "en": "The missing symbol (null when none given or read)",
               "zh": "缺少的符号（未给出也未读出时为 null）"},
    "library": {"type": "string",
                "en": "The library file name the symbol belongs to, e.g. libnvJitLink.so.12",
                "zh": "该符号所属库的文件名，例如 libnvJitLink.so.12"},
    "needed_by": {"type": "string", "en": "The library whose load failed, as the error names it",
                  "zh": "报错中加载失败的库"},
    "wheels_dir": {"type": "string",
                   "en": "torch's nvidia wheels directory (site-packages/nvidia), null when not found",
                   "zh": "torch 的 nvidia wheel 目录（site-packages/nvidia），找不到时为 null"},
    "ld_library_path": {"type": "array", "en": "The LD_LIBRARY_PATH directories used, in order",
                        "zh": "所用 LD_LIBRARY_PATH 中的目录，按顺序"},
    "candidates": {"type": "array",
                   "en": f"Every copy of the library in search order: {{{_CANDIDATE}}}",
                   "zh": f"按搜索顺序列出该库的每一份：{{{_CANDIDATE}}}"},
    "loaded": {"type": "object",
               "en": "The copy the loader takes (the one a live process maps: mapped true), or null",
               "zh": "动态加载器实际使用的那一份（进程存活时为其映射的那份：mapped 为 true），或 null"},
    "lacking": {"type": "string",
                "en": "The path of the loaded copy when it does not define the symbol, else null",
                "zh": "实际加载的那份未定义该符号时为其路径，否则为 null"},
    "provider": {"type": "string",
                 "en": "The first copy that defines the symbol, preferring torch's wheel (null if none)",
                 "zh": "第一个定义了该符号的副本，优先 torch 的 wheel（都没有时为 null）"},
    "pid": {"type": "integer", "en": "The process examined (null when none)",
            "zh": "被检查的进程（没有时为 null）"},
    "mapped": {"type": "array", "en": "CUDA libraries the process maps: {path, name, in_wheels}",
               "zh": "进程映射的 CUDA 库：{path, name, in_wheels}"},
    "outside": {"type": "array",
                "en": "Mapped CUDA libraries outside site-packages/nvidia while torch's wheels are there",
                "zh": "torch 的 wheel 存在时，从 site-packages/nvidia 之外映射的 CUDA 库"},
}
DEFAULT_TIMEOUT = 15.0

# The libraries torch's CUDA wheels ship; a symbol's prefix names its library.
CUDA_LIB = re.compile(r"^lib(cublasLt|cublas|cudnn\w*|cusparseLt|cusparse|cusolver\w*|cufft\w*|curand|"
                      r"nvJitLink|nvrtc|cudart|cupti|nccl|nvToolsExt|cufile)\.so(\.[0-9.]+)?$")
_PREFIXES = (("__nvJitLink", "libnvJitLink"), ("nvJitLink", "libnvJitLink"), ("cublasLt", "libcublasLt"),
             ("cublas", "libcublas"), ("cudnn", "libcudnn"), ("cusparseLt", "libcusparseLt"),
             ("cusparse", "libcusparse"), ("cusolver", "libcusolver"), ("cufft", "libcufft"),
             ("curand", "libcurand"), ("nvrtc", "libnvrtc"), ("cupti", "libcupti"), ("cuda", "libcudart"))
_UNDEFINED = re.compile(r"(\S+\.so[.0-9]*):\s*undefined symbol:\s*(\w+)(?:,\s*version\s+(lib\w+\.so\.\d+))?")
_NOT_DEFINED = re.compile(r"(?:(\S+\.so[.0-9]*):\s*)?symbol\s+(\w+),?\s+version\s+(lib\w+\.so\.\d+)\s+"
                          r"not defined in file\s+(\S+)")
_CANNOT_LOAD = re.compile(r"Cannot load symbol\s+(\w+)")
# torch's own check of the cuDNN it found (no symbol: the version differs).
_CUDNN = re.compile(r"cuDNN version (?:incompatibility|mismatch): PyTorch was compiled\s+against")
_SYSTEM_DIRS = ("/usr/local/cuda/lib64", "/usr/local/cuda/targets/*/lib", "/usr/lib/x86_64-linux-gnu",
                "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/lib64", "/usr/lib")
_LIST_MAX = 40


def parse_error(line: str) -> dict[str, str | None]:
    """{symbol, library, needed_by} from a loader's error line (each None when absent)."""
    m = _NOT_DEFINED.search(line)
    if m:
        return {"symbol": m.group(2), "library": m.group(3), "needed_by": m.group(1)}
    m = _UNDEFINED.search(line)
    if m:
        return {"symbol": m.group(2), "library": m.group(3) or library_of(m.group(2)),
                "needed_by": m.group(1)}
    m = _CANNOT_LOAD.search(line)
    if m:
        return {"symbol": m.group(1), "library": library_of(m.group(1)), "needed_by": None}
    if _CUDNN.search(line):
        return {"symbol": None, "library": "libcudnn", "needed_by": None}
    return {"symbol": None, "library": None, "needed_by": None}


def library_of(symbol: str) -> str | None:
    """The library base name (no .so) a CUDA symbol's prefix names: cublasLtGetVersion -> libcublasLt."""
    for prefix, lib in _PREFIXES:
        if symbol.startswith(prefix):
            return lib
    return None


def wheels_dir_of(path: str | None) -> str | None:
    """site-packages/nvidia from a path inside it (`.../torch/lib/../../nvidia/cusparse/lib/x.so`)."""
    if not path:
        return None
    norm = os.path.normpath(path)
    marker = os.sep + "nvidia" + os.sep
    at = norm.rfind(marker)
    if at < 0 or not re.search(r"(site|dist)-packages$", norm[:at]):
        return None
    return norm[: at + len(marker) - 1]


def parse_maps(text: str) -> list[str]:
    """Distinct CUDA library paths in /proc/PID/maps text, in map order."""
    found: list[str] = []
    for raw in text.splitlines():
        parts = raw.split(None, 5)
        if len(parts) < 6:
            continue
        path = parts[5].strip()
        if path.endswith(" (deleted)"):
            path = path[: -len(" (deleted)")]
        if CUDA_LIB.match(os.path.basename(path)) and path not in found:
            found.append(path)
    return found


def mapped_entries(paths: list[str], wheels: str | None) -> tuple[list[dict[str, Any]], list[str]]:
    """(mapped entries, paths outside the wheels' tree when the tree is known)."""
    entries = []
    outside = []
    for path in paths:
        inside = bool(wheels) and os.path.normpath(path).startswith(wheels + os.sep)
        entries.append({"path": path, "name": os.path.basename(path),
                        "in_wheels": inside if wheels else None})
        if wheels and not inside:
            outside.append(path)
    return entries, outside


def _matches(directory: str, library: str) -> list[str]:
    """Files in `directory` that are `library` (an exact name, or a base name with any .so suffix)."""
    if ".so" in library:
        path = os.path.join(directory, library)
        return [path] if os.path.isfile(path) else []
    return sorted(p for p in glob.glob(os.path.join(glob.escape(directory), library + ".so.*"))
                  if os.path.isfile(p) and CUDA_LIB.match(os.path.basename(p)))[:4]


def candidates(library: str, ld_dirs: list[str], wheels: str | None,
               symbol: str | None) -> list[dict[str, Any]]:
    """Each copy of `library` in the loader's order for a wheel library: LD_LIBRARY_PATH (searched before
    the wheels' RUNPATH), the wheels, then the system directories."""
    seen: set[str] = set()
    out: list[dict[str, Any]] = []
    groups: list[tuple[str, list[str]]] = [("LD_LIBRARY_PATH", ld_dirs)]
    if wheels:
        groups.append(("wheel", sorted(glob.glob(os.path.join(glob.escape(wheels), "*", "lib")))))
    system: list[str] = []
    for pattern in _SYSTEM_DIRS:
        system.extend(sorted(glob.glob(pattern)))
    groups.append(("system", system))
    for source, dirs in groups:
        for directory in dirs:
            for path in _matches(directory, library):
                real = os.path.realpath(path)
                if real in seen or len(out) >= _LIST_MAX:
                    continue
                seen.add(real)
                out.append({"path": path, "source": source,
                            "defines": _elf.defines(path, symbol) if symbol else None})
    return out


def verdict(cands: list[dict[str, Any]], mapped: list[str], library: str | None) -> dict[str, Any]:
    """loaded, lacking and provider from the candidates (a copy the process maps wins)."""
    loaded = cands[0] if cands else None
    base = (library or "").split(".so")[0]
    for path in mapped:
        if base and os.path.basename(path).split(".so")[0] == base:
            # The copy the process really took; its source stays where the loader found it.
            found = next((c for c in cands if os.path.realpath(c["path"]) == os.path.realpath(path)),
                         {"path": path, "source": "mapped", "defines": None})
            loaded = {**found, "mapped": True}
            break
    provider = next((c["path"] for c in cands if c["defines"] and c["source"] == "wheel"), None) or \
        next((c["path"] for c in cands if c["defines"]), None)
    lacking = loaded["path"] if loaded and loaded["defines"] is False else None
    return {"loaded": loaded, "lacking": lacking, "provider": provider}


def run(params: dict[str, Any], ctx: CheckContext) -> dict[str, Any]:
    parsed = parse_error(params.get("error") or "")
    symbol = (params.get("symbol") or parsed["symbol"] or "").strip() or None
    library = (params.get("library") or parsed["library"] or "").strip() or None
    result: dict[str, Any] = {
        "available": True, "reason": None, "symbol": symbol, "library": library,
        "needed_by": parsed["needed_by"], "wheels_dir": None, "ld_library_path": [], "candidates": [],
        "loaded": None, "lacking": None, "provider": None, "pid": None, "mapped": [], "outside": [],
    }
    pid, env, maps_text, why = _process(params)
    mapped = parse_maps(maps_text) if maps_text else []
    wheels = _wheels(params, parsed["needed_by"], mapped)
    result["wheels_dir"] = wheels
    given = params.get("ld_library_path")
    ld = given if given not in (None, "") else env.get("LD_LIBRARY_PATH", ctx.env.get("LD_LIBRARY_PATH", ""))
    result["ld_library_path"] = [d for d in str(ld).split(":") if d][:_LIST_MAX]
    if pid is not None:
        result["pid"] = pid
        result["mapped"], result["outside"] = mapped_entries(mapped[:_LIST_MAX], wheels)
    if library:
        result["candidates"] = candidates(library, result["ld_library_path"], wheels, symbol)
        result.update(verdict(result["candidates"], mapped, library))
    if not library and pid is None:
        result.update(available=False,
                      reason=why or "no symbol or library in the error line, and no live process to read")
    return result


def _process(params: dict[str, Any]) -> tuple[int | None, dict[str, str], str, str | None]:
    """(pid, environment, maps text, why none) of the job's process, when one lives and can be read."""
    if not any(params.get(k) not in (None, "") for k in ("pid", "match", "log")):
        return None, {}, "", None
    _how, (selected, _unreadable, reason) = process._select(
        {"pid": params.get("pid"), "match": params.get("match"), "log": params.get("log")})
    if not selected:
        return None, {}, "", reason or "no live process selected"
    pid = min(selected)
    try:
        env = _procfs.environ(pid)
        maps = _procfs.read_bytes(f"/proc/{pid}/maps").decode("utf-8", "replace")
    except OSError as exc:
        return None, {}, "", f"cannot read /proc/{pid}: {exc.strerror or exc} (run as the job's user or root)"
    return pid, env, maps, None


def _wheels(params: dict[str, Any], needed_by: str | None, mapped: list[str]) -> str | None:
    site = (params.get("site_packages") or "").strip()
    if site:
        path = os.path.join(site, "nvidia")
        return path if os.path.isdir(path) else None
    for path in [needed_by, *mapped]:
        found = wheels_dir_of(path)
        if found and os.path.isdir(found):
            return found
    return None
