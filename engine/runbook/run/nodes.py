"""Node specs -> `Node`s: comma lists, Slurm hostlists, @hostfiles, inventories, ssh aliases.

    --nodes gpu[001-064,070]        Slurm hostlist (python-hostlist)
    --nodes a,b,@hosts.txt          lists and host files (`host slots=8` lines are fine)
    --nodes localhost               this machine, through the local transport
    --inventory inv.yaml [--group trainers]
                                    our YAML, or an Ansible INI/YAML inventory

Names are kept as given, so `~/.ssh/config` aliases (and their ProxyJump, User,
Port, IdentityFile) apply when the SSH transport connects.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from runbook.format import safeyaml
from runbook.transports import Node

LOCAL_NAMES = {"localhost"}
MAX_HOSTS = 1_000_000  # in one range: enough for any cluster, refuses a typo's billion
# Ansible connection variables -> ours
_ANSIBLE_VARS = {"ansible_host": "host", "ansible_user": "user", "ansible_port": "port",
                 "ansible_python_interpreter": "python", "ansible_ssh_host": "host",
                 "ansible_ssh_user": "user", "ansible_ssh_port": "port"}


class NodeSpecError(ValueError):
    """A node spec or inventory that cannot be read; the message says where and why."""


def split_top_level(spec: str) -> list[str]:
    """Split at commas that are not inside [...] (those belong to a hostlist)."""
    parts, depth, current = [], 0, ""
    for ch in spec:
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return [p.strip() for p in parts if p.strip()]


def expand(spec: str) -> list[str]:
    """Every host name a `--nodes` spec names, in order, without duplicates."""
    import hostlist

    names: dict[str, None] = {}  # ordered, and linear to de-duplicate at cluster scale
    for part in split_top_level(spec):
        if part.startswith("@"):
            found = read_hostfile(Path(part[1:]))
        else:
            try:
                found = hostlist.expand_hostlist(part)
            except hostlist.BadHostlist as exc:
                raise NodeSpecError(f"--nodes: bad host list {part!r}: {exc}") from None
        names.update(dict.fromkeys(found))
    if not names:
        raise NodeSpecError(f"--nodes {spec!r}: names no host")
    return list(names)


def read_hostfile(path: Path) -> list[str]:
    """One host per line; `# comments`, blank lines and MPI/DeepSpeed `slots=N` are allowed."""
    try:
        lines = safeyaml.read_text(path)[0].splitlines()
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        raise NodeSpecError(f"--nodes @{_shown(path)}: {getattr(exc, 'strerror', None) or exc}") from None
    except safeyaml.LimitError as exc:
        raise NodeSpecError(f"{path}:{exc.line}: {exc.message}") from None
    hosts = []
    for number, line in enumerate(lines, 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if any("=" not in w and not w.isdigit() for w in words[1:]):
            raise NodeSpecError(f"{path}:{number}: expected 'host [slots=N]', got {line.strip()!r}")
        hosts.append(words[0])
    return hosts


def _shown(path: Path) -> str:
    """A path as it goes into a one-line message: control characters escaped."""
    text = str(path)
    return text if text.isprintable() else repr(text)[1:-1]


def build_nodes(spec: str | None, inventory: str | None = None, group: str | None = None,
                executor: str | None = None) -> list[Node]:
    """The nodes a run names; vars come from the inventory when one is given."""
    known: dict[str, dict[str, Any]] = {}
    if inventory:
        known = load_inventory(Path(inventory), group)
    names = expand(spec) if spec else list(known)
    if inventory and not names:
        raise NodeSpecError(f"{inventory}: no hosts" + (f" in group {group!r}" if group else ""))
    return [_node(name, known.get(name, {}), executor) for name in names]


def _node(name: str, vars_: dict[str, Any], executor: str | None) -> Node:
    transport = executor or ("local" if name in LOCAL_NAMES else "ssh")
    return Node(name, transport, dict(vars_))


# ---- inventories ----


def load_inventory(path: Path, group: str | None) -> dict[str, dict[str, Any]]:
    """host -> vars, from our YAML inventory or an Ansible INI/YAML one."""
    try:
        text = safeyaml.read_text(path)[0]
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        raise NodeSpecError(f"--inventory {_shown(path)}: {getattr(exc, 'strerror', None) or exc}") from None
    except safeyaml.LimitError as exc:
        raise NodeSpecError(f"{path}:{exc.line}: {exc.message}") from None
    if path.suffix in (".ini", ".cfg", "") and not text.lstrip().startswith(("hosts:", "all:", "{")):
        return _ansible_ini(path, text, group)
    import yaml

    try:
        data = safeyaml.load(text) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        why = exc.message if isinstance(exc, safeyaml.LimitError) else "YAML syntax error"
        raise NodeSpecError(f"{path}{where}: {why}") from None
    if not isinstance(data, dict):
        raise NodeSpecError(f"{path}: an inventory is a mapping (hosts:, groups: or all:)")
    if "all" in data:
        return _ansible_yaml(path, data, group)
    return _ours(path, data, group)


def _ours(path: Path, data: dict[str, Any], group: str | None) -> dict[str, dict[str, Any]]:
    """hosts: {name: vars}, groups: {g: {hosts: [...], vars: {...}}}, vars: {...}."""
    common = _mapping(path, data.get("vars"), "vars")
    hosts: dict[str, dict[str, Any]] = {}
    for pattern, vars_ in _mapping(path, data.get("hosts"), "hosts").items():
        for name in _hostlist(path, pattern):
            hosts[name] = {**common, **_mapping(path, vars_, f"hosts.{pattern}")}
    groups = _mapping(path, data.get("groups"), "groups")
    if group is None:
        return hosts
    if group not in groups:
        raise NodeSpecError(f"{path}: no group {group!r} (groups: {', '.join(map(str, groups)) or 'none'})")
    body = _mapping(path, groups[group], f"groups.{group}")
    listed = body.get("hosts") or []
    if not isinstance(listed, list):
        raise NodeSpecError(f"{path}: groups.{group}.hosts must be a list of host names")
    members = [n for p in listed for n in _hostlist(path, p)]
    group_vars = _mapping(path, body.get("vars"), f"groups.{group}.vars")
    return {n: {**common, **hosts.get(n, {}), **group_vars} for n in members}


def _mapping(path: Path, value: Any, where: str) -> dict[str, Any]:
    """`value` as a mapping (None is empty), or a NodeSpecError naming the key."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise NodeSpecError(f"{path}: {where} must be a mapping, not {type(value).__name__}")
    return value


def _hostlist(path: Path, pattern: Any) -> list[str]:
    import hostlist

    try:
        return hostlist.expand_hostlist(str(pattern))
    except hostlist.BadHostlist as exc:
        raise NodeSpecError(f"{path}: bad host list {str(pattern)!r}: {exc}") from None


def _ansible_vars(path: Path, vars_: Any, where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in _mapping(path, vars_, where).items():
        out[_ANSIBLE_VARS.get(key, key)] = value
    return out


def _ansible_yaml(path: Path, data: dict[str, Any], group: str | None) -> dict[str, dict[str, Any]]:
    groups: dict[str, dict[str, dict[str, Any]]] = {}

    def walk(name: str, body: Any, inherited: dict[str, Any]) -> None:
        body = _mapping(path, body, name)
        vars_ = {**inherited, **_ansible_vars(path, body.get("vars"), f"{name}.vars")}
        members = groups.setdefault(name, {})
        for host, host_vars in _mapping(path, body.get("hosts"), f"{name}.hosts").items():
            for expanded in _ansible_range(path, str(host)):
                members[expanded] = {**vars_, **_ansible_vars(path, host_vars, f"{name}.hosts.{host}")}
        for child, child_body in _mapping(path, body.get("children"), f"{name}.children").items():
            walk(child, child_body, vars_)
            members.update(groups[child])

    walk("all", data["all"], {})
    wanted = group or "all"
    if wanted not in groups:
        raise NodeSpecError(f"{path}: no group {wanted!r} (groups: {', '.join(sorted(groups))})")
    return groups[wanted]


def _ansible_ini(path: Path, text: str, group: str | None) -> dict[str, dict[str, Any]]:
    groups: dict[str, dict[str, dict[str, Any]]] = {"ungrouped": {}}
    children: dict[str, list[str]] = {}
    group_vars: dict[str, dict[str, Any]] = {}
    section, kind = "ungrouped", "hosts"
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].split(";", 1)[0].strip() if not raw.lstrip().startswith(
            "[") else raw.strip()
        if not line:
            continue
        header = re.fullmatch(r"\[([^\]:]+)(?::(vars|children))?\]", line)
        if header:
            section, kind = header.group(1), header.group(2) or "hosts"
            groups.setdefault(section, {})
            continue
        if line.startswith("["):
            raise NodeSpecError(f"{path}:{number}: bad section header {line!r}")
        if kind == "vars":
            key, _, value = line.partition("=")
            group_vars.setdefault(section, {})[key.strip()] = _ini_value(value.strip())
        elif kind == "children":
            children.setdefault(section, []).append(line.split()[0])
        else:
            words = line.split()
            host_vars = dict(_ini_pair(path, number, w) for w in words[1:])
            for host in _ansible_range(path, words[0]):
                groups[section][host] = _ansible_vars(path, host_vars, section)
    return _resolve_ini(path, groups, children, group_vars, group)


def _resolve_ini(path: Path, groups: dict[str, dict[str, dict[str, Any]]],
                 children: dict[str, list[str]], group_vars: dict[str, dict[str, Any]],
                 group: str | None) -> dict[str, dict[str, Any]]:
    def members(name: str, seen: frozenset[str] = frozenset()) -> dict[str, dict[str, Any]]:
        if name in seen:
            return {}
        own_vars = _ansible_vars(path, group_vars.get(name), f"[{name}:vars]")
        out = {h: {**own_vars, **v} for h, v in groups.get(name, {}).items()}
        for child in children.get(name, []):
            for host, v in members(child, seen | {name}).items():
                out.setdefault(host, {**own_vars, **v})
        return out

    if group is None:
        everything: dict[str, dict[str, Any]] = {}
        for name in groups:
            for host, v in members(name).items():
                everything.setdefault(host, v)
        return everything
    if group not in groups and group not in children:
        raise NodeSpecError(f"{path}: no group {group!r} (groups: "
                            f"{', '.join(sorted(set(groups) - {'ungrouped'}))})")
    return members(group)


def _ini_pair(path: Path, number: int, word: str) -> tuple[str, Any]:
    key, sep, value = word.partition("=")
    if not sep:
        raise NodeSpecError(f"{path}:{number}: expected key=value, got {word!r}")
    return key, _ini_value(value)


def _ini_value(value: str) -> Any:
    value = value.strip("'\"")
    return int(value) if value.isdigit() else value


def _ansible_range(path: Path, pattern: str) -> list[str]:
    """Ansible's `gpu[01:04]` and `node[a:f]` ranges (with a colon) -> names."""
    match = re.search(r"\[([0-9a-z]+):([0-9a-z]+)(?::([0-9]+))?\]", pattern)
    if not match:
        return [pattern]
    start, end, step = match.group(1), match.group(2), int(match.group(3) or 1)
    head, tail = pattern[: match.start()], pattern[match.end():]
    if step == 0:
        raise NodeSpecError(f"{path}: host range {pattern!r} has a step of 0")
    if start.isdigit() and end.isdigit():
        width = len(start) if start.startswith("0") else 0
        count = (int(end) - int(start)) // step + 1
        values = (str(i).zfill(width) for i in range(int(start), int(end) + 1, step))
    elif len(start) == 1 and len(end) == 1 and start.isalpha() and end.isalpha():
        count = (ord(end) - ord(start)) // step + 1
        values = (chr(c) for c in range(ord(start), ord(end) + 1, step))
    else:
        raise NodeSpecError(f"{path}: host range {pattern!r}: expected numbers [01:16] or single"
                            " letters [a:f]")
    if count > MAX_HOSTS:
        raise NodeSpecError(f"{path}: host range {pattern!r} names {count:,} hosts, more than"
                            f" {MAX_HOSTS:,}")
    return [n for v in values for n in _ansible_range(path, head + v + tail)]

