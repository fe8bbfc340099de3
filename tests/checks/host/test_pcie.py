"""The `pcie` check: PCIe ACS control read from `lspci -vvv` (verbatim lines from NCCL issues),
the IOMMU groups and the kernel's IOMMU options."""

from __future__ import annotations

from pathlib import Path

from runbook.checks.host import pcie

DATA = Path(__file__).resolve().parents[2] / "data" / "pcie"

# The shape of `lspci -vvv` around an ACS capability (a bridge, then a GPU without ACS).
LSPCI = """\
40:01.1 PCI bridge: Advanced Micro Devices, Inc. [AMD] Starship/Matisse GPP Bridge
\tCapabilities: [2a0 v1] Access Control Services
\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-
\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-
41:00.0 VGA compatible controller: NVIDIA Corporation AD102GL [RTX 5880 Ada Generation] (rev a1)
\tSubsystem: NVIDIA Corporation Device 1850
60:01.1 PCI bridge: Advanced Micro Devices, Inc. [AMD] Starship/Matisse GPP Bridge
\tCapabilities: [2a0 v1] Access Control Services
\t\tACSCtl:\tSrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-
"""


def fake_lspci(tmp_path: Path, text: str, code: int = 0) -> str:
    script = tmp_path / "lspci"
    (tmp_path / "out.txt").write_text(text)
    script.write_text(f"#!/bin/sh\ncat '{tmp_path / 'out.txt'}'\nexit {code}\n")
    script.chmod(0o755)
    return str(script)


def test_acs_lines_from_a_public_issue() -> None:
    devices = pcie.parse_acs((DATA / "nccl-629-acsctl.txt").read_text())
    assert len(devices) == 15 and all(d["slot"] is None for d in devices)
    on = [d for d in devices if pcie.acs_redirects(d["control"])]
    assert len(on) == 6  # five with SrcValid+ ReqRedir+ CmpltRedir+, one with SrcValid+ only
    off = pcie.parse_acs((DATA / "nccl-1405-acsctl.txt").read_text())
    assert len(off) == 14 and not any(pcie.acs_redirects(d["control"]) for d in off)


def test_devices_are_named_with_their_slot(tmp_path: Path, make_ctx) -> None:
    result = pcie.run({"lspci": fake_lspci(tmp_path, LSPCI)}, make_ctx())
    assert result["available"] and result["reason"] is None
    assert result["acs_devices"] == 2
    (bridge,) = result["acs_enabled"]
    assert bridge["slot"] == "40:01.1" and "GPP Bridge" in bridge["name"]
    assert bridge["control"].startswith("SrcValid+ TransBlk- ReqRedir+ CmpltRedir+")
    assert isinstance(result["iommu_groups"], int) and isinstance(result["iommu_cmdline"], list)


def test_not_root_not_installed_or_failing(tmp_path: Path, make_ctx) -> None:
    denied = "00:01.1 PCI bridge: Intel Corporation Device 7a38\n\tCapabilities: <access denied>\n"
    result = pcie.run({"lspci": fake_lspci(tmp_path, denied)}, make_ctx())
    assert not result["available"] and "root" in result["reason"]
    missing = pcie.run({"lspci": str(tmp_path / "no-such-lspci")}, make_ctx())
    assert not missing["available"] and "pciutils" in missing["reason"]
    broken = pcie.run({"lspci": fake_lspci(tmp_path / ".." / tmp_path.name, "", code=3)}, make_ctx())
    assert not broken["available"] and broken["reason"].startswith("lspci -vvv failed")
    clean = pcie.run({"lspci": fake_lspci(tmp_path, "00:00.0 Host bridge: Intel Corporation Device 09a2\n")},
                     make_ctx())
    assert clean["available"] and clean["acs_enabled"] == [] and clean["acs_devices"] == 0
