"""What `runbook collect` runs on a node: Python snippets for the `python` check, shell for `command`.

Kept apart from sections.py, which reads their results. The snippets run in the
probe's own Python (any 3.8+, standard library only); the shell scripts run under /bin/sh
(POSIX, dash included) and mark their output with @@ lines for the reader to split.
"""

from __future__ import annotations

DMESG_LINES = 500
XID_LINES = 200

# Runs in the probe's Python (the `python` check) with PID set: the training process's command
# line, working directory, interpreter, and the config files its command line names.
TARGET_CODE = r'''
import os

SUFFIXES = (".yaml", ".yml", ".json", ".toml")


def read_argv(pid):
    with open("/proc/%d/cmdline" % pid, "rb") as f:
        raw = f.read()
    return [a.decode("utf-8", "replace") for a in raw.rstrip(b"\0").split(b"\0")] if raw else []


def env_path(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            for entry in f.read().split(b"\0"):
                if entry.startswith(b"PATH="):
                    return entry[5:].decode("utf-8", "replace")
    except OSError:
        pass
    return ""


def link(path):
    try:
        return os.readlink(path)
    except OSError:
        return ""


def interpreter(argv, cwd, exe, path):
    # argv[0] keeps a virtualenv's python; /proc/PID/exe resolves past it to the base interpreter.
    first, found = (argv[0] if argv else ""), ""
    if os.path.isabs(first):
        found = first
    elif "/" in first:
        found = os.path.normpath(os.path.join(cwd, first))
    elif first:
        for folder in path.split(":"):
            candidate = os.path.join(folder or cwd, first)
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                found = candidate
                break
    if os.path.basename(found).startswith("python"):
        return found
    return exe if os.path.basename(exe).startswith("python") else ""


def configs(argv, cwd):
    found = []
    for arg in argv[1:]:
        for part in [arg] + arg.split("=")[1:]:
            if part.lower().endswith(SUFFIXES):
                full = os.path.normpath(os.path.join(cwd, os.path.expanduser(part)))
                if os.path.isfile(full) and full not in found:
                    found.append(full)
    return found


argv = read_argv(PID)
cwd = link("/proc/%d/cwd" % PID)
exe = link("/proc/%d/exe" % PID)
result = {"argv": argv, "cwd": cwd, "exe": exe, "python": interpreter(argv, cwd, exe, env_path(PID)),
          "configs": configs(argv, cwd)}
'''


# dmesg, else journalctl -k (dmesg_restrict), with the Xid lines and the tail marked for parsing.
DMESG_SCRIPT = rf'''
out=$(LC_ALL=C dmesg -T 2>&1); rc=$?; src="dmesg -T"
if [ $rc -ne 0 ]; then
  printf '@@refused dmesg %s %s\n' "$rc" "$(printf '%s\n' "$out" | head -n 1)"
  out=$(journalctl -k -b --no-pager -o short-iso -n 20000 2>&1); rc=$?; src="journalctl -k -b"
  if [ $rc -ne 0 ]; then
    printf '@@refused journalctl %s %s\n' "$rc" "$(printf '%s\n' "$out" | head -n 1)"; exit 3
  fi
fi
printf '@@source %s\n@@xid\n' "$src"
printf '%s\n' "$out" | grep -i 'xid' | tail -n {XID_LINES}
printf '@@tail\n'
printf '%s\n' "$out" | tail -n {DMESG_LINES}
'''


# Runs in the probe's Python (the `python` check): SPEC's globs and files read, each up to a limit.
CONFIG_CODE = r'''
import glob, json, os

SPEC = json.loads(__SPEC__)
files, unmatched, seen = [], [], set()


def read(path, origin):
    if path in seen or len(files) >= SPEC["max_files"]:
        return
    seen.add(path)
    entry = {"path": path, "origin": origin, "size": None, "text": None, "error": None, "truncated": False}
    try:
        entry["size"] = os.path.getsize(path)
        with open(path, "rb") as f:
            data = f.read(SPEC["max_bytes"] + 1)
        entry["truncated"] = len(data) > SPEC["max_bytes"]
        data = data[:SPEC["max_bytes"]]
        if b"\0" in data:
            entry["error"] = "binary file, not included"
        else:
            entry["text"] = data.decode("utf-8", "replace")
    except OSError as exc:
        entry["error"] = "%s: %s" % (type(exc).__name__, exc.strerror or exc)
    files.append(entry)


for pattern in SPEC["patterns"]:
    pattern = os.path.expanduser(pattern)
    names = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
    names = [n for n in names if os.path.isfile(n)]
    if not names:
        unmatched.append(pattern)
    for name in names:
        read(name, "--set config")
for name in SPEC["named"]:
    read(name, "training command line")
result = {"files": files, "unmatched": unmatched}
'''


CONDA_SCRIPT = r'''
py=__PY__
prefix=$("$py" -c 'import sys; print(sys.prefix)' 2>&1) || { echo "$prefix"; exit 127; }
if [ ! -d "$prefix/conda-meta" ]; then echo "@@not-conda $prefix"; exit 0; fi
for c in "$CONDA_EXE" "$prefix/bin/conda" "$prefix/../../bin/conda" "$(command -v conda)" \
         "$(command -v mamba)" "$(command -v micromamba)"; do
  if [ -n "$c" ] && [ -x "$c" ]; then echo "@@conda $c list -p $prefix"; exec "$c" list -p "$prefix"; fi
done
echo "@@conda-meta $prefix/conda-meta"
ls "$prefix/conda-meta" | sed -n 's/\.json$//p'
'''


RAY_SCRIPT = r'''
py=__PY__
case "$py" in */*) ;; *) py=$(command -v "$py" || echo "$py");; esac
ray="$(dirname "$py")/ray"
if [ ! -x "$ray" ]; then ray=$(command -v ray) || { echo "@@not-installed"; exit 0; }; fi
echo "@@ray $ray"
exec "$ray" status
'''
