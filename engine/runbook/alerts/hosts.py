"""The node an alert is about, named as `runbook run --nodes` would name it.

Exporters name the machine in different labels: node exporter's `instance` is HOST:PORT of
the exporter, DCGM exporter adds `Hostname`, Kubernetes rules add `node`, `node_uname_info`
joins give `nodename`. A name label wins over `instance`, which may be a pod's address.

The name is then looked up where the CLI's runs look: an inventory host of that name, an
inventory host whose `host` (Ansible's ansible_host) is that address, the short name of a
fully qualified one, or a `Host` alias of ~/.ssh/config whose `HostName` it is. Anything
else stays as it is, for ssh to resolve.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

NODE_LABELS = ("node", "hostname", "Hostname", "nodename", "instance")
SLURM_JOB_LABEL = "slurm_job_id"
SSH_CONFIG_MAX_BYTES = 1 << 20
# A host name or an address and nothing else: no option (-o...), no range (a[1-4]), no list (a,b).
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")
_SLURM_JOB = re.compile(r"\d{1,12}(_\d{1,9})?")


def host_of(labels: Mapping[str, str]) -> str | None:
    """The machine the labels name, without the exporter's port; None when none names one."""
    for label in NODE_LABELS:
        value = labels.get(label, "").strip()
        if value:
            host = _without_port(value) if label == "instance" else value
            return host if is_host_name(host) else None
    return None


def slurm_job_of(labels: Mapping[str, str]) -> str | None:
    value = labels.get(SLURM_JOB_LABEL, "").strip()
    return value if _SLURM_JOB.fullmatch(value) else None


def is_host_name(text: str) -> bool:
    if _NAME.fullmatch(text):
        return True
    try:
        return ipaddress.ip_address(text).version == 6
    except ValueError:
        return False


def _without_port(instance: str) -> str:
    if "://" in instance:  # blackbox exporter: the probed URL
        return urlsplit(instance).hostname or ""
    if instance.startswith("["):  # [::1]:9100
        return instance[1:].partition("]")[0]
    if instance.count(":") == 1:
        return instance.partition(":")[0]
    return instance  # a bare IPv6 address, or a name


class HostMap:
    """Names as the inventory and ~/.ssh/config know them."""

    def __init__(self, inventory: Mapping[str, Mapping[str, Any]] | None = None,
                 ssh_aliases: Mapping[str, str] | None = None) -> None:
        self.inventory = dict(inventory or {})
        self.by_address = {str(v["host"]): name for name, v in self.inventory.items() if v.get("host")}
        self.ssh_aliases = dict(ssh_aliases or {})

    def node_name(self, host: str) -> str:
        if host in self.inventory:
            return host
        if host in self.by_address:
            return self.by_address[host]
        short = host.split(".", 1)[0]
        if not _is_address(host) and short in self.inventory:
            return short
        return self.ssh_aliases.get(host, host)


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def ssh_aliases(config: Path) -> dict[str, str]:
    """HostName -> the first plain `Host` alias that names it, from one ssh config file."""
    try:
        with config.open("rb") as fh:
            text = fh.read(SSH_CONFIG_MAX_BYTES).decode("utf-8", "replace")
    except OSError:
        return {}
    aliases: dict[str, str] = {}
    current: list[str] = []
    for line in text.splitlines():
        key, _, value = line.strip().replace("=", " ", 1).partition(" ")
        key, value = key.lower(), value.strip()
        if key in ("host", "match"):
            current = [w for w in value.split() if key == "host" and not set(w) & set("*?!")]
        elif key == "hostname" and current:
            aliases.setdefault(value, current[0])
    return aliases
