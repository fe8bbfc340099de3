"""ZeRO-3 placeholders in real torch.save files: counted from data.pkl opcodes, never unpickled.

The files are written by torch itself (a state dict whose tensors have shape torch.Size([0]), as
`model.state_dict()` of a ZeRO-3-partitioned module returns); the reader must agree with what
torch.load sees, and must not import or call anything a pickle names.
"""

from __future__ import annotations

import collections
import io
import json
import pickle
import sys
from pathlib import Path
from typing import Any

import pytest

from runbook.checks.files import _torch_pickle, _zero_layout, checkpoint

torch = pytest.importorskip("torch")


def model() -> Any:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.LayerNorm(8), torch.nn.Linear(8, 2))


def placeholders(state: dict[str, Any], keep: tuple[str, ...] = ()) -> dict[str, Any]:
    """ZeRO-3's view: every partitioned parameter an empty tensor; `keep` stay whole (persistent)."""
    return collections.OrderedDict(
        (k, v if k in keep else torch.empty(0, dtype=torch.float16)) for k, v in state.items())


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("zero")
    net = model()
    torch.save(net.state_dict(), root / "full.bin")
    out = root / "out"
    (out / "checkpoint-3" / "global_step3").mkdir(parents=True)
    torch.save(placeholders(net.state_dict(), keep=("1.weight", "1.bias")), out / "pytorch_model.bin")
    tag = out / "checkpoint-3" / "global_step3"
    torch.save({"module": placeholders(net.state_dict()), "global_steps": 3},
               tag / "zero_pp_rank_0_mp_rank_00_model_states.pt")
    for rank in range(2):
        torch.save({"optimizer_state_dict": {"rank": rank}},
                   tag / f"zero_pp_rank_{rank}_mp_rank_00_optim_states.pt")
    (out / "checkpoint-3" / "zero_to_fp32.py").write_text("# DeepSpeed's consolidation script\n")
    (out / "checkpoint-3" / "latest").write_text("global_step3")
    return root


def test_shapes_from_opcodes_match_torch_load(files: Path) -> None:
    for name in ("full.bin", "out/pytorch_model.bin"):
        loaded = torch.load(files / name, map_location="cpu", weights_only=True)
        expected = {k: list(v.shape) for k, v in loaded.items()}
        assert _torch_pickle.zip_tensor_shapes(str(files / name)) == expected


def test_model_entry_of_a_deepspeed_model_states_file(files: Path) -> None:
    path = files / "out/checkpoint-3/global_step3/zero_pp_rank_0_mp_rank_00_model_states.pt"
    shapes = _torch_pickle.zip_tensor_shapes(str(path))
    assert set(shapes) == {"0.weight", "0.bias", "1.weight", "1.bias", "2.weight", "2.bias"}
    assert all(shape == [0] for shape in shapes.values())


def test_a_pickle_naming_code_is_replayed_not_run(tmp_path: Path) -> None:
    """A GLOBAL of os.system with REDUCE becomes an inert stand-in: nothing imported or called."""
    class Boom:
        def __reduce__(self) -> tuple[Any, ...]:
            return (print, ("this must never print",))
    raw = pickle.dumps({"w": Boom()}, protocol=2)
    before = set(sys.modules)
    top = _torch_pickle.replay(raw)
    assert _torch_pickle.shapes_of(top) == {}
    assert set(sys.modules) == before


def test_bad_streams_are_a_scan_error(tmp_path: Path) -> None:
    with pytest.raises(_torch_pickle.PickleScanError):
        _torch_pickle.replay(pickle.dumps({"a": 1})[:-3])  # no STOP
    legacy = tmp_path / "legacy.pt"
    buffer = io.BytesIO()
    torch.save({"w": torch.zeros(2)}, buffer, _use_new_zipfile_serialization=False)
    legacy.write_bytes(buffer.getvalue())
    with pytest.raises(_torch_pickle.PickleScanError):
        _torch_pickle.zip_tensor_shapes(str(legacy))


def test_zero_size_fields_and_the_zero_folder(files: Path) -> None:
    shapes = _zero_layout.stdlib_shapes([str(files / "out/pytorch_model.bin")], None)
    fields = _zero_layout.zero_size_fields(shapes)
    assert fields == {"zero_size_count": 4, "zero_size_keys": ["0.weight", "0.bias", "2.weight", "2.bias"],
                      "tensors_scanned": 6}
    folder = _zero_layout.find_zero_folder(str(files / "out/pytorch_model.bin"))
    assert folder == {"dir": str(files / "out/checkpoint-3/global_step3"), "tag": "global_step3",
                      "optim_states": 2, "model_states": 1,
                      "zero_to_fp32": str(files / "out/checkpoint-3/zero_to_fp32.py")}
    assert _zero_layout.find_zero_folder(str(files / "full.bin")) is None


def test_the_check_counts_placeholders_of_a_safetensors_file(tmp_path: Path, make_ctx: Any) -> None:
    header = {"__metadata__": {"format": "pt"},
              "a.lora_A.weight": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]},
              "a.lora_B.weight": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]},
              "norm.weight": {"dtype": "F32", "shape": [8], "data_offsets": [0, 32]}}
    raw = json.dumps(header).encode()
    path = tmp_path / "adapter_model.safetensors"
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + bytes(32))
    result = checkpoint.run({"path": str(path)}, make_ctx(30))
    assert result["zero_size_count"] == 2 and result["tensors_scanned"] == 3
    assert result["zero_size_keys"] == ["a.lora_A.weight", "a.lora_B.weight"]
    assert result["zero_checkpoint"] is None


def test_the_check_on_a_torch_file_of_placeholders(files: Path, make_ctx: Any) -> None:
    result = checkpoint.run({"path": str(files / "out/pytorch_model.bin")}, make_ctx(120))
    assert result["available"] and not result["corrupt"]
    assert result["zero_size_count"] == 4 and result["tensors_scanned"] == 6
    assert result["zero_checkpoint"]["tag"] == "global_step3"
    full = checkpoint.run({"path": str(files / "full.bin")}, make_ctx(120))
    assert full["zero_size_count"] == 0 and full["tensors_scanned"] == 6


def test_a_pickled_module_of_placeholders_counts_through_torch(tmp_path: Path, make_ctx: Any) -> None:
    """A whole nn.Module pickled has no state dict in data.pkl: the worker's shapes count instead."""
    net = model()
    for param in net.parameters():
        param.data = torch.empty(0)
    torch.save({"model": net}, tmp_path / "module.pt")
    assert _torch_pickle.zip_tensor_shapes(str(tmp_path / "module.pt")) == {}
    result = checkpoint.run({"path": str(tmp_path / "module.pt"), "allow_pickle": True}, make_ctx(120))
    assert result["loaded_with_pickle"] and result["zero_size_count"] == 6 and result["tensors_scanned"] == 6
