"""`pcie`: is GPU peer-to-peer traffic redirected by PCIe ACS or the IOMMU on this node?

PCIe Access Control Services on a bridge (`ACSCtl: SrcValid+ ... ReqRedir+ CmpltRedir+`)
send peer-to-peer requests up to the root complex instead of straight to the other GPU; with
the IOMMU translating them, NCCL's P2P transport hangs or copies return wrong data. NVIDIA's
NCCL troubleshooting guide asks for ACS off on bare metal. This check reads `lspci -vvv` (ACS
control is only shown to root), the IOMMU groups the kernel made, and the kernel's IOMMU
command-line options.
"""

from __future__ import annotations

import os
import re
from typing import Any

from runbook.checks.base import CheckContext

NAME = "pcie"
SUMMARY = {
    "en": "PCIe ACS on bridges and the IOMMU: what redirects GPU peer-to-peer traffic",
    "zh": "PCI 桥上的 PCIe ACS 与 IOMMU：是什么让 GPU 点对点流量被重定向",
}
PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "lspci": {"type": "string", "default": "lspci",
                  "description": "The lspci program (from pciutils)"},
    },
    "additionalProperties": False,
}
RESULT_FIELDS = {
    "available": {"type": "boolean",
                  "en": "lspci ran and showed the ACS control of the bridges (needs root)",
                  "zh": "lspci 已运行并显示了各 PCI 桥的 ACS 控制（需要 root）"},
    "reason": {"type": "string", "en": "Why ACS could not be read (null when it was)",
               "zh": "无法读取 ACS 的原因（能读取时为 null）"},
    "acs_devices": {"type": "integer", "en": "Devices that show an ACSCtl line",
                    "zh": "显示 ACSCtl 行的设备数"},
    "acs_enabled": {"type": "array",
                    "en": "Devices whose ACS redirects or validates requests: {slot, name, control} "
                          "(SrcValid+, ReqRedir+ or CmpltRedir+)",
                    "zh": "ACS 会重定向或校验请求的设备：{slot, name, control}（SrcValid+、ReqRedir+ 或 "
                          "CmpltRedir+）"},
    "iommu_groups": {"type": "integer",
                     "en": "IOMMU groups in /sys/kernel/iommu_groups (0: the IOMMU is off)",
                     "zh": "/sys/kernel/iommu_groups 中的 IOMMU 组数（0 表示 IOMMU 未开启）"},
    "iommu_cmdline": {"type": "array",
                      "en": "IOMMU and ACS options on the kernel command line (intel_iommu=, amd_iommu=, "
                            "iommu=, pci=noacs)",
                      "zh": "内核命令行中的 IOMMU 与 ACS 选项"
                            "（intel_iommu=、amd_iommu=、iommu=、pci=noacs）"},
    "iommu_passthrough": {"type": "boolean",
                          "en": "The IOMMU is in pass-through mode (iommu=pt): DMA is not translated",
                          "zh": "IOMMU 处于直通模式（iommu=pt）：DMA 不经过地址转换"},
}
DEFAULT_TIMEOUT = 15.0

_DEVICE = re.compile(r"^((?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+(.*)$")
_ACS_CTL = re.compile(r"^\s*ACSCtl:\s*(.*?)\s*$")
_REDIRECTS = ("SrcValid+", "ReqRedir+", "CmpltRedir+")
_IOMMU_OPTION = re.compile(r"^(?:intel_iommu|amd_iommu|iommu|iommu\.\w+)=|^pci=.*noacs")


def run(params: dict[str, Any], ctx: CheckContext) -> dict[str, Any]:
    cmdline = _kernel_options()
    result: dict[str, Any] = {
        "available": False, "reason": None, "acs_devices": 0, "acs_enabled": [],
        "iommu_groups": _iommu_groups(), "iommu_cmdline": cmdline,
        "iommu_passthrough": any(o in ("iommu=pt", "iommu.passthrough=1") for o in cmdline),
    }
    outcome = ctx.run_command([str(params.get("lspci") or "lspci"), "-vvv"], timeout=10)
    if outcome.not_found:
        result["reason"] = "lspci is not installed (package pciutils)"
        return result
    if outcome.timed_out or outcome.returncode != 0:
        result["reason"] = f"lspci -vvv failed: {(outcome.stderr.strip() or 'timed out')[:200]}"
        return result
    devices = parse_acs(outcome.stdout)
    result["acs_devices"] = len(devices)
    result["acs_enabled"] = [d for d in devices if acs_redirects(d["control"])]
    if devices:
        result["available"] = True
    elif "<access denied>" in outcome.stdout:
        result["reason"] = "lspci shows the capabilities only to root: run the check as root"
    else:
        result["available"] = True  # no bridge offers ACS at all: nothing redirects P2P
    return result


def parse_acs(text: str) -> list[dict[str, Any]]:
    """Every ACSCtl line of `lspci -vvv` text with the device it belongs to (slot and name are
    null for ACSCtl lines without a device header, e.g. `lspci -vvv | grep ACSCtl`)."""
    found: list[dict[str, Any]] = []
    slot: str | None = None
    name: str | None = None
    for line in text.splitlines():
        header = _DEVICE.match(line)
        if header:
            slot, name = header.group(1), header.group(2)
            continue
        control = _ACS_CTL.match(line)
        if control:
            found.append({"slot": slot, "name": name, "control": control.group(1)})
    return found


def acs_redirects(control: str) -> bool:
    """Whether an ACSCtl value sends peer requests elsewhere than straight to the peer."""
    flags = control.split()
    return any(flag in flags for flag in _REDIRECTS)


def _iommu_groups() -> int:
    try:
        return len(os.listdir("/sys/kernel/iommu_groups"))
    except OSError:
        return 0


def _kernel_options() -> list[str]:
    try:
        with open("/proc/cmdline", encoding="utf-8", errors="replace") as fh:
            words = fh.read().split()
    except OSError:
        return []
    return [w for w in words if _IOMMU_OPTION.match(w)]
