"""The `gpu` check's readers against answers recorded on real GPUs (scripts/gpu-check.sh).

`nvml_*.json` holds every NVML call the reader made on a real machine and what NVML answered
(scripts/gpu/nvml_record.py); `replay_binding` turns it back into a `pynvml` module, so the NVML
reader runs here, without a GPU, against what real hardware said. The nvidia-smi CSVs are that
machine's answers to the exact queries the check sends.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from runbook.checks.gpu import gpu
from runbook.checks.gpu.gpu_nvml import read_nvml

ROOT = Path(__file__).resolve().parents[3]
DATA = Path(__file__).resolve().parents[1] / "data"


class NVMLError(Exception):
    """What the replayed binding raises where the real one raised an NVML error."""


class Handle:
    def __init__(self, index: int) -> None:
        self.index = index


def _value(answer: Any) -> Any:
    if isinstance(answer, dict) and "struct" in answer:
        return types.SimpleNamespace(**{k: _value(v) for k, v in answer["struct"].items()})
    if isinstance(answer, dict) and "handle" in answer:
        return Handle(answer["handle"])
    if isinstance(answer, list):
        return [_value(v) for v in answer]
    return answer


def _key(fn: str, args: tuple[Any, ...]) -> str:
    plain = [{"handle": a.index} if isinstance(a, Handle) else a for a in args]
    return json.dumps([fn, plain])


def replay_binding(recording: dict[str, Any]) -> types.ModuleType:
    """A `pynvml` that answers each call as the recorded machine did (a call it never saw fails)."""
    answers = {json.dumps([c["fn"], c["args"]]): c for c in recording["calls"]}
    errors: dict[str, type[Exception]] = {}
    module = types.ModuleType("pynvml")
    module.__dict__.update(recording["constants"])

    def function(fn: str) -> Any:
        def call(*args: Any) -> Any:
            entry = answers.get(_key(fn, args))
            if entry is None:
                raise AssertionError(f"{fn}{args} was not recorded: record again on a GPU machine "
                                     "with scripts/gpu/nvml_record.py")
            if "error" in entry:
                raise errors.setdefault(entry["error"], type(entry["error"], (NVMLError,), {}))(
                    entry.get("message", ""))
            return _value(entry["answer"])
        return call

    for name in {c["fn"] for c in recording["calls"]}:
        setattr(module, name, function(name))
    return module


def _recorder_module() -> Any:
    spec = importlib.util.spec_from_file_location("nvml_record", ROOT / "scripts" / "gpu" / "nvml_record.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_recording_replays_to_the_same_reading() -> None:
    # Record the 8x H100 stand-in of test_gpu.py, replay it: the reader must see the same node.
    from tests.checks.gpu.test_gpu import h100_pynvml

    stub = h100_pynvml()
    recorder = _recorder_module().Recorder(stub)
    direct = read_nvml(recorder)
    recording = json.loads(json.dumps({"calls": recorder.calls, "constants": recorder.constants}))
    assert read_nvml(replay_binding(recording)) == direct == read_nvml(h100_pynvml())
    assert any(c.get("error") == "NVMLError_NotSupported" for c in recording["calls"])


def test_an_unrecorded_call_says_to_record_again() -> None:
    binding = replay_binding({"calls": [], "constants": {}})
    assert not hasattr(binding, "nvmlInit")
    with pytest.raises(AttributeError):
        read_nvml(binding)


# -- real machines: an H100 (driver 580.159.04, nvidia-ml-py without nvmlMemory_v2 use recorded)
#    and an H200 (same driver; the reader's v2 memory call recorded), both single-GPU VMs --------

REAL = DATA / "gpu-real"
MIB = 1 << 20
# What both readers must agree on, per machine: the recordings' own values, checked by hand
# against `nvidia-smi -q` on the machine.
MACHINES = {
    "h100": {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-00000000-0000-4000-8000-000000000100",
             "memory_total_mib": 81559, "pci_bus_id": "00000000:00:06.0", "power_limit_w": 700.0,
             "ecc": {"volatile_uncorrected": 0, "volatile_corrected": 0, "aggregate_uncorrected": 1,
                     "aggregate_corrected": 0},
             "max_sm_mhz": 1980, "mem_mhz": 2619},
    "h200": {"name": "NVIDIA H200", "uuid": "GPU-00000000-0000-4000-8000-000000000200",
             "memory_total_mib": 143771, "pci_bus_id": "00000000:00:06.0", "power_limit_w": 700.0,
             "ecc": {"volatile_uncorrected": 0, "volatile_corrected": 0, "aggregate_uncorrected": 0,
                     "aggregate_corrected": 0},
             "max_sm_mhz": 1980, "mem_mhz": 3201},
}
NO_REMAPS = {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}
FULL_LINK = {"gen": 5, "max_gen": 5, "width": 16, "max_width": 16, "degraded": False}


def _recording(machine: str, name: str) -> dict[str, Any]:
    return json.loads((REAL / machine / name).read_text("utf-8"))


def _busy_pid(machine: str) -> int:
    return int((REAL / machine / "nvidia_smi_apps_busy.csv").read_text().split(",")[1])


def _fake_smi(tmp_path: Path, machine: str, state: str) -> dict[str, str]:
    """An nvidia-smi that answers each of the check's queries as the real one did."""
    folder = REAL / machine
    script = tmp_path / "bin" / "nvidia-smi"
    script.parent.mkdir(exist_ok=True)
    gpus = folder / ("nvidia_smi_full_busy.csv" if state == "busy" else "nvidia_smi_full.csv")
    apps = f"cat '{folder / 'nvidia_smi_apps_busy.csv'}'" if state == "busy" else "true"
    script.write_text("#!/bin/sh\ncase \"$1\" in\n"
                      f"  --query-gpu=*) cat '{gpus}' ;;\n"
                      f"  --query-remapped-rows=*) cat '{folder / 'nvidia_smi_remap.csv'}' ;;\n"
                      f"  --query-compute-apps=*) {apps} ;;\n"
                      "  *) exit 2 ;;\nesac\n")
    script.chmod(0o755)
    return {"PATH": f"{script.parent}:/usr/bin:/bin"}


@pytest.mark.parametrize("machine", sorted(MACHINES))
@pytest.mark.parametrize("state", ["idle", "busy"])
def test_nvml_reader_on_a_real_gpu(machine: str, state: str) -> None:
    recording = _recording(machine, f"nvml_{state}.json")
    reading = read_nvml(replay_binding(recording))
    assert reading == recording["read_nvml"]  # what the reader said on the machine, said again here
    facts = MACHINES[machine]
    [gpu] = reading["gpus"]
    assert reading["driver_version"] == "580.159.04"
    fixed = ("name", "uuid", "memory_total_mib", "pci_bus_id", "power_limit_w", "ecc")
    assert {k: gpu[k] for k in fixed} == {k: facts[k] for k in fixed}
    assert (gpu["clocks"]["max_sm_mhz"], gpu["clocks"]["mem_mhz"]) == (facts["max_sm_mhz"], facts["mem_mhz"])
    assert gpu["remapped_rows"] == NO_REMAPS and gpu["pcie"] == FULL_LINK and gpu["mig_enabled"] is False
    # Hopper remaps rows instead of retiring pages: NVML answers NotSupported, read as unknown.
    assert gpu["retired_pages"] == {"single_bit": None, "double_bit": None, "pending": None}
    if state == "idle":
        assert gpu["processes"] == [] and gpu["utilization_percent"] == 0
        assert gpu["throttle_reasons"] == []
    else:
        assert gpu["processes"] == [{"pid": _busy_pid(machine), "used_mib": 3046}]
        assert gpu["utilization_percent"] == 100 and gpu["throttle_reasons"] == ["sw_power_cap"]


def test_nvml_memory_leaves_the_drivers_reserve_out_where_the_binding_can() -> None:
    # The H200's binding was asked for v2 memory: an idle GPU uses 0 MiB, as nvidia-smi says, with
    # 615 MiB reserved by the driver. The H100's recording is of the v1 call (before the fix):
    # an idle GPU "used" 480 MiB, which is the driver's reserve nvidia-smi lists apart.
    [h200] = read_nvml(replay_binding(_recording("h200", "nvml_idle.json")))["gpus"]
    [h100] = read_nvml(replay_binding(_recording("h100", "nvml_idle.json")))["gpus"]
    assert h200["memory_used_mib"] == 0
    assert h100["memory_used_mib"] == 480
    smi_idle_used = int((REAL / "h100" / "nvidia_smi_full.csv").read_text().split(",")[4])
    assert smi_idle_used == 0


@pytest.mark.parametrize("machine", sorted(MACHINES))
@pytest.mark.parametrize("state", ["idle", "busy"])
def test_nvidia_smi_reader_on_a_real_gpu(machine: str, state: str, tmp_path: Path, make_ctx,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # nvidia-smi only
    result = gpu.run({"xid": False}, make_ctx(5.0, env=_fake_smi(tmp_path, machine, state)))
    assert result["available"] and result["source"] == "nvidia-smi", result["reason"]
    [smi] = result["gpus"]
    [nvml] = read_nvml(replay_binding(_recording(machine, f"nvml_{state}.json")))["gpus"]
    same = ("name", "uuid", "memory_total_mib", "pci_bus_id", "power_limit_w", "ecc", "remapped_rows",
            "pcie", "mig_enabled", "processes", "throttle_reasons")
    # Utilisation, power, temperature and clocks were sampled moments apart: not compared.
    assert {k: smi[k] for k in same} == {k: nvml[k] for k in same}
    assert result["driver_version"] == "580.159.04"
    assert smi["memory_used_mib"] == (3055 if state == "busy" else 0)


def test_the_check_answers_recorded_on_the_machines_still_validate() -> None:
    # The `runbook check gpu --format json` documents: every field the check declares is there.
    for machine in MACHINES:
        doc = _recording(machine, "check_gpu.json")
        result = doc["nodes"][0]["result"]
        assert set(gpu.RESULT_FIELDS) <= set(result), set(gpu.RESULT_FIELDS) - set(result)
        assert result["xid_readable"] and result["xid_source"] == "dmesg" and result["xid_count"] == 0


def test_the_real_kernel_log_has_driver_lines_but_no_xid() -> None:
    from runbook.checks.gpu.gpu_xid import parse_xid

    for machine in MACHINES:
        lines = (REAL / machine / "dmesg_nvidia.txt").read_text().splitlines()
        assert any("NVRM:" in line for line in lines)
        assert parse_xid(lines) == []


@pytest.mark.parametrize("machine", sorted(MACHINES))
def test_torch_check_reads_the_machines_cuda_torch(machine: str, tmp_path: Path, make_ctx) -> None:
    # The worker's answer on the machine (CUDA 13.0 torch 2.11, cuDNN 9.19, NCCL 2.28.9), given
    # back by a stand-in interpreter: the check must read every CUDA field from it.
    from runbook.checks.distributed import torch_info
    from runbook.checks.distributed._torch_worker import MARK

    recorded = _recording(machine, "check_torch.json")["nodes"][0]["result"]
    worker = {name: recorded[name] for name in torch_info._TORCH_FIELDS}
    python = tmp_path / "python3"
    python.write_text(f"#!/bin/sh\necho 'torch prints this'\necho '{MARK}{json.dumps(worker)}'\n")
    python.chmod(0o755)
    result = torch_info.run({"python": str(python)}, make_ctx(10.0, env={"PATH": "/usr/bin:/bin"}))
    assert result["available"], result["reason"]
    assert (result["version"], result["cuda"], result["cudnn"], result["nccl_version"]) == (
        "2.11.0+cu130", "13.0", 91900, "2.28.9")
    assert result["cuda_available"] is True and result["device_count"] == 1
    assert result["gpus_per_node"] == 1  # the GPUs torch sees, when the runbook gives none


def test_nccl_check_on_the_machines_job() -> None:
    from runbook.checks.distributed import nccl

    # The H100 image sets NCCL_VERSION=2.28.3-1 while the job maps libnccl 2.28.9: a label of the
    # image, not a setting (the check reported it as one before the run on real hardware).
    h100 = _recording("h100", "check_nccl.json")["nodes"][0]["result"]
    assert h100["settings"] == {"NCCL_VERSION": "2.28.3-1"}
    assert nccl.nccl_settings({**h100["settings"], "NCCL_DEBUG": "INFO"}) == {"NCCL_DEBUG": "INFO"}
    for machine in MACHINES:
        result = _recording(machine, "check_nccl.json")["nodes"][0]["result"]
        [library] = result["libraries"]
        assert library["path"].endswith("site-packages/nvidia/nccl/lib/libnccl.so.2")
        assert (library["version"], library["version_string"], library["version_source"]) == (
            "2.28.9", "2.28.9+cuda13.0", "binary")
        assert result["multiple_libraries"] is False


def test_nccl_banner_as_torch_2_11s_libnccl_writes_it() -> None:
    from runbook.checks.distributed import nccl

    found = nccl._BANNER.search(b"\x00NCCL version 2.28.9+cuda13.0\x00more")
    assert found and found.group(1) == b"2.28.9" and found.group(2) == b"+cuda13.0"


@pytest.mark.parametrize("machine", sorted(MACHINES))
def test_a_real_nccl_flight_recorder_trace_holds_what_cross_rank_analysis_reads(machine: str) -> None:
    # One rank on a real GPU (scripts/gpu/fr_dump.py): torch 2.11's JSON variant, trace version 2.10.
    # The pickle beside it is kept as bytes for a restricted reader's tests; nothing unpickles it.
    folder = ROOT / "tests" / "data" / "flight-recorder" / f"nccl-1rank-{machine}"
    trace = json.loads((folder / "fr_trace.json").read_text("utf-8"))
    assert (trace["version"], trace["comm_lib_version"]) == ("2.10", "2.28.9")
    assert trace["pg_config"]["0"] == {"desc": "default_pg", "name": "0", "ranks": "[0]"}
    assert trace["pg_status"]["0"]["last_completed_collective"] == "4"
    entries = trace["entries"]
    ops = [(e["collective_seq_id"], e["profiling_name"], e["state"], e["process_group"]) for e in entries]
    assert ops == [(1, "nccl:all_reduce", "completed", ["0", "default_pg"]),
                   (2, "nccl:broadcast", "completed", ["0", "default_pg"]),
                   (3, "nccl:_all_gather_base", "completed", ["0", "default_pg"]),
                   (4, "nccl:all_reduce_barrier", "completed", ["0", "default_pg"])]
    assert (entries[0]["input_sizes"], entries[0]["input_dtypes"]) == ([[1048576]], ["Float"])
    assert (folder / "fr_trace.pickle").read_bytes()[:2] == b"\x80\x02"  # pickle protocol 2
