"""A pasted view of how a node's GPUs connect: `nvidia-smi topo -m`, or CUDA's
p2pBandwidthLatencyTest.

People paste them when NCCL hangs or crawls between the GPUs of one node and someone asked how
the GPUs connect. An engineer reads two things in them:

- `p2p-slower`: the bandwidth test measured peer-to-peer copies (`P2P=Enabled`) slower between
  distinct GPUs than copies staged through the host (`P2P=Disabled`): the peer traffic is being
  redirected (PCIe ACS sends it up to the root complex, or an IOMMU translates it), which is
  also what makes NCCL's P2P transport hang. `nccl-errors:p2p-redirected`.
- `topo-pcie`: the topology matrix joins its GPUs only through PCIe (PIX, PXB, PHB, NODE, SYS;
  no NVLink `NV#`): peer-to-peer traffic crosses PCIe switches or the host bridge, where ACS or
  an IOMMU redirects or blocks it. The same conclusion, as a guess: the matrix alone cannot say
  ACS is on.
- `copy-zeros`: a pasted session where a tensor copied to another GPU holds only zeros (or
  denormals) where the same number of values were seen non-zero, printed or written in the
  code: the copy between GPUs lost the data, as it does when ACS or an IOMMU redirects peer
  traffic (copies staged through the CPU are right). `nccl-errors:p2p-redirected`.

Rules and texts are data; the site's triage page applies the same ones (site/triage_export.py).
"""

from __future__ import annotations

import re
import statistics
from typing import Any

from runbook.triage.readings import shown

RULES: dict[str, Any] = {
    "header": r"^\s*GPU0(?:\s+GPU\d+)+\b",  # the matrix's first line: `\tGPU0\tGPU1\t... CPU Affinity`
    "row": r"^\s*GPU(\d+)\s+(.*)$",
    "pcie": ["PIX", "PXB", "PHB", "NODE", "SYS"],  # links through PCIe (switch, bridge, CPU)
    "nvlink": r"^NV\d+$",
    # the bandwidth test's matrices: a title, a `D\D` header, then one row per device
    "bandwidth": r"\b(?:Unidirectional|Bidirectional) P2P=(Enabled|Disabled) Bandwidth\b",
    # one row: the device, then its values, a separator before each (no backtracking)
    "matrix_row": r"^\s*(\d+)((?:\s+\d+(?:\.\d+)?)+)\s*$",
    "slower_ratio": 0.5,  # P2P=Enabled at most this share of P2P=Disabled: redirected
    # a printed CUDA tensor: its values (nested lists, `...` where elided), then its device
    "printed": r"tensor\(\s*(\[[-+\d\s.,eE\[\]naif]{1,20000}?\])\s*,\s*device='cuda:(\d+)'",
    # values written in the code: torch.tensor([1., 2.]), torch.Tensor([[0.6, 0.6]])
    "literal": r"torch\.[Tt]ensor\(\s*(\[[-+\d\s.,eE\[\]]{1,20000}?\])",
    "value": r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf)",
    # the GPUs a paste names: cuda:1, device=0, .to(1), .cuda(1)
    "device": r"cuda:(\d+)|\bdevice=(\d+)|\.to\((\d+)\)|\.cuda\((\d+)\)",
    "copy": r"\.to\(|\.cuda\(|\bcopy_\(|\b[Mm]ov(?:e|es|ed|ing)\b",
    "vanishing": 1e-30,  # |value| below this: zero, or the denormal a lost copy reads as
    "min_values": 2,  # one zero is a value, not a lost copy
    "seen_values": 4,  # of the values seen non-zero, quoted
}
CONCLUSIONS = {"p2p-slower": "nccl-errors:p2p-redirected", "topo-pcie": "nccl-errors:p2p-redirected",
               "copy-zeros": "nccl-errors:p2p-redirected"}
TEXTS: dict[str, dict[str, str]] = {
    "p2p-slower": {
        "en": "the P2P bandwidth test copies {enabled} GB/s between GPUs with P2P enabled against {disabled} "
              "GB/s with it disabled (medians): peer traffic is redirected (PCIe ACS or an IOMMU)",
        "zh": "P2P 带宽测试中，开启 P2P 时 GPU 之间的拷贝为 {enabled} GB/s，"
              "关闭时为 {disabled} GB/s（中位数）：点对点流量被重定向了（PCIe ACS 或 IOMMU）"},
    "topo-pcie": {
        "en": "the topology joins its {gpus} GPUs through PCIe only ({links}, no NVLink): peer-to-peer "
              "traffic crosses PCIe switches or the host bridge, where ACS or an IOMMU can redirect it",
        "zh": "拓扑中 {gpus} 块 GPU 之间只经 PCIe 相连（{links}，没有 NVLink）：点对点流量经过 PCIe 交换机或"
              "主桥，ACS 或 IOMMU 可能会重定向它"},
    "copy-zeros": {
        "en": "the tensor copied to cuda:{device} holds only zeros where the same {count} values were "
              "{seen}: a copy between GPUs lost the data, as when PCIe ACS or an IOMMU redirects "
              "peer-to-peer traffic",
        "zh": "拷贝到 cuda:{device} 的张量全为零，而同样的 {count} 个值原本是 {seen}："
              "GPU 之间的拷贝丢失了数据，PCIe ACS 或 IOMMU 重定向点对点流量时就会这样"},
}
HEADER = re.compile(RULES["header"])
ROW = re.compile(RULES["row"])
NVLINK = re.compile(RULES["nvlink"])
BANDWIDTH = re.compile(RULES["bandwidth"])
MATRIX_ROW = re.compile(RULES["matrix_row"])
PRINTED = re.compile(RULES["printed"])
LITERAL = re.compile(RULES["literal"])
VALUE = re.compile(RULES["value"])
DEVICE = re.compile(RULES["device"])
COPY = re.compile(RULES["copy"])


def readings(lines: list[str]) -> list[dict[str, Any]]:
    """What the pasted bandwidth test, then the pasted topology matrix, show (each at most once)."""
    out = []
    slower = _p2p_slower(lines)
    if slower is not None:
        out.append({"reading": "p2p-slower", "conclusion": CONCLUSIONS["p2p-slower"], "first": None,
                    "facts": slower})
    pcie = _topo_pcie(lines)
    if pcie is not None:
        out.append({"reading": "topo-pcie", "conclusion": CONCLUSIONS["topo-pcie"], "first": None,
                    "guess": True, "facts": pcie})
    lost = _copy_zeros("\n".join(lines))
    if lost is not None:
        out.append({"reading": "copy-zeros", "conclusion": CONCLUSIONS["copy-zeros"], "first": None,
                    "facts": lost})
    return out


def is_table(line: str) -> bool:
    """Whether a line opens a topology matrix or a bandwidth test's matrix."""
    return bool(HEADER.match(line) or BANDWIDTH.search(line))


def describe_reading(reading: dict[str, Any], lang: str = "en") -> str:
    facts = {k: shown(v) for k, v in reading["facts"].items()}
    return TEXTS[reading["reading"]][lang].format(**facts)


def _topo_pcie(lines: list[str]) -> dict[str, Any] | None:
    """The first topology matrix's links, when every one between two GPUs goes through PCIe."""
    for at, line in enumerate(lines):
        header = HEADER.match(line)
        if not header:
            continue
        gpus = len(header.group(0).split())
        links: list[str] = []
        for row in lines[at + 1:at + 1 + gpus]:
            m = ROW.match(row)
            if not m:
                break
            cells = m.group(2).split()[:gpus]
            links += [c for i, c in enumerate(cells) if i != int(m.group(1)) and c != "X"]
        if gpus < 2 or not links or any(NVLINK.match(c) for c in links):
            return None
        if not set(links) <= set(RULES["pcie"]):
            return None
        kinds = [k for k in RULES["pcie"] if k in links]
        return {"gpus": gpus, "links": ", ".join(kinds)}
    return None


def _p2p_slower(lines: list[str]) -> dict[str, Any] | None:
    """The medians between distinct GPUs of the first P2P=Enabled and P2P=Disabled matrices, when
    enabled is at most `slower_ratio` of disabled."""
    medians: dict[str, float] = {}
    for at, line in enumerate(lines):
        m = BANDWIDTH.search(line)
        if not m or m.group(1) in medians:
            continue
        values = [float(v) for row in _matrix(lines, at + 1) for v in row]
        if values:
            medians[m.group(1)] = statistics.median(values)
    enabled, disabled = medians.get("Enabled"), medians.get("Disabled")
    if enabled is None or disabled is None or enabled > RULES["slower_ratio"] * disabled:
        return None
    # two decimals, as the test prints them (the page: Number(x.toFixed(2)))
    return {"enabled": float(f"{enabled:.2f}"), "disabled": float(f"{disabled:.2f}")}


def _matrix(lines: list[str], start: int) -> list[list[str]]:
    """The off-diagonal values of the matrix under a title: its `D\\D` header, then its rows."""
    rows = []
    for line in lines[start + 1:start + 65]:  # past the `D\D 0 1 2` header; 64 devices at most
        m = MATRIX_ROW.match(line)
        if not m:
            break
        device, cells = int(m.group(1)), m.group(2).split()
        rows.append([v for i, v in enumerate(cells) if i != device])
    return rows


def _copy_zeros(text: str) -> dict[str, Any] | None:
    """The first printed CUDA tensor of only vanishing values whose count of values was seen
    non-zero elsewhere in the paste, when the paste copies between two or more GPUs."""
    if not COPY.search(text) or len({next(g for g in m.groups() if g) for m in DEVICE.finditer(text)}) < 2:
        return None
    printed = [(VALUE.findall(m.group(1)), m.group(2)) for m in PRINTED.finditer(text)]
    seen = [values for values, _ in printed] + [VALUE.findall(m.group(1)) for m in LITERAL.finditer(text)]
    for values, device in printed:
        if len(values) < RULES["min_values"] or not all(_vanishes(v) for v in values):
            continue
        for other in seen:
            if len(other) == len(values) and not all(_vanishes(v) for v in other):
                return {"device": int(device), "count": len(values),
                        "seen": ", ".join(other[:RULES["seen_values"]])
                        + (", ..." if len(other) > RULES["seen_values"] else "")}
    return None


def _vanishes(value: str) -> bool:
    number = float(value)
    return number == number and abs(number) < RULES["vanishing"]  # NaN is a value, not a lost one
