"""`checkpoint` against real checkpoints saved by torch (and safetensors files written byte by byte).

Each `checkpoint.run` on a torch file starts a child Python that imports torch (a few seconds),
so the end-to-end tests are few; layouts and key comparisons are also tested in-process.
"""

from __future__ import annotations

import collections
import json
import os
import pickle
import shutil
import stat
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from runbook.checks.files import _checkpoint_worker, checkpoint

torch = pytest.importorskip("torch")

MODEL_FACTORY = '''
import torch

print("building the reference model")  # noise on stdout must not confuse the check


def build(hidden=8):
    return torch.nn.Sequential(torch.nn.Linear(4, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 2))


class Net(torch.nn.Module):
    def __init__(self, hidden=8):
        super().__init__()
        self.body = build(hidden)
'''


def make_model(hidden: int = 8) -> Any:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 2))


def write_safetensors(path: Path, shapes: dict[str, list[int]], cut: int = 0) -> Path:
    """A float32 safetensors file (8-byte header length, JSON header, data), `cut` bytes short."""
    header: dict[str, Any] = {}
    offset = 0
    for name, shape in shapes.items():
        size = 4
        for dim in shape:
            size *= dim
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps({"__metadata__": {"format": "pt"}, **header}).encode()
    raw += b" " * (-len(raw) % 8)
    data = len(raw).to_bytes(8, "little") + raw + b"\0" * offset
    path.write_bytes(data[:len(data) - cut])
    return path


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Real checkpoints: a full resume dict, weights only, DataParallel, torch.compile, wider model."""
    root = tmp_path_factory.mktemp("ckpts")
    model = make_model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(2, 4)).sum().backward()
    optimizer.step()
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10)
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "step": 42, "rng_state": torch.get_rng_state()},
               root / "full.pt")
    torch.save(model.state_dict(), root / "weights.pt")
    torch.save(torch.nn.DataParallel(model).state_dict(), root / "dp.pt")
    with warnings.catch_warnings():  # importing inductor warns about torch.jit in torch itself
        warnings.simplefilter("ignore", DeprecationWarning)
        # torch.compile only wraps here: the state dict keys exist without compiling anything.
        torch.save(torch.compile(model).state_dict(), root / "compiled.pt")
    torch.save(make_model(16).state_dict(), root / "wide.pt")
    np = pytest.importorskip("numpy")
    torch.save({"model": model.state_dict(), "numpy_rng_state": np.random.get_state(), "step": 3},
               root / "numpy_rng.pt")
    import torch.distributed.checkpoint as dcp

    with warnings.catch_warnings():  # "torch.distributed is ... uninitialized": single process, as meant
        warnings.simplefilter("ignore")
        dcp.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": 42},
                 checkpoint_id=str(root / "dcp"))
    full = (root / "full.pt").read_bytes()
    (root / "partial.pt").write_bytes(full[:len(full) // 2])
    (root / "refmodels.py").write_text(MODEL_FACTORY)
    return root


def check(params: dict[str, Any], make_ctx: Any, timeout: float = 120.0) -> dict[str, Any]:
    result = checkpoint.run(params, make_ctx(timeout))
    assert set(result) <= set(checkpoint.RESULT_FIELDS) | {"timed_out"}
    return result


# -- end to end: torch in a child process --------------------------------------------------------


def test_full_training_checkpoint(ckpts: Path, make_ctx) -> None:
    result = check({"path": str(ckpts / "full.pt")}, make_ctx)
    assert result["available"] is True and result["reason"] is None
    assert result["format"] == "torch" and result["corrupt"] is False
    assert result["top_level_keys"] == ["model", "optimizer", "scheduler", "step", "rng_state"]
    assert result["state_dict_key"] == "model"
    assert result["has"] == {"optimizer": True, "scheduler": True, "rng": True, "step": True}
    assert result["step_value"] == 42
    assert result["incomplete_resume"] is False
    assert result["num_tensors"] == 4 and result["num_params"] == 4 * 8 + 8 + 8 * 2 + 2
    assert result["key_sample"] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert result["prefixes"] == [] and result["matches"] is None
    assert result["size_bytes"] == (ckpts / "full.pt").stat().st_size
    assert 0 <= result["age_s"] < 600 and result["load_s"] >= 0
    assert result["torch_version"] == str(torch.__version__)


def test_weights_only_save_matches_its_model_factory(ckpts: Path, make_ctx) -> None:
    result = check({"path": str(ckpts / "weights.pt"), "reference": "refmodels:build",
                    "reference_kwargs": {"hidden": 8}, "pythonpath": str(ckpts)}, make_ctx)
    assert result["state_dict_key"] == ""
    assert result["has"] == {"optimizer": False, "scheduler": False, "rng": False, "step": False}
    assert result["incomplete_resume"] is True  # seed 002: resume restores weights only
    assert result["reference_error"] is None
    assert result["matches"] is True
    assert result["missing_count"] == 0 and result["unexpected_count"] == 0
    assert result["shape_mismatches"] == [] and result["explained_by_prefix"] is None


def test_compiled_checkpoint_against_plain_is_explained_by_orig_mod(ckpts: Path, make_ctx) -> None:
    result = check({"path": str(ckpts / "compiled.pt"), "reference": str(ckpts / "weights.pt")}, make_ctx)
    assert result["prefixes"] == ["_orig_mod."]
    assert result["missing_keys"] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert result["unexpected_keys"][0] == "_orig_mod.0.weight" and result["unexpected_count"] == 4
    assert result["explained_by_prefix"] == "_orig_mod." and result["prefix_on"] == "checkpoint"
    assert result["shape_mismatches"] == [] and result["matches"] is False


def test_plain_checkpoint_against_dataparallel_is_explained_by_module(ckpts: Path, make_ctx) -> None:
    result = check({"path": str(ckpts / "weights.pt"), "reference": str(ckpts / "dp.pt")}, make_ctx)
    assert result["missing_keys"] == ["module.0.weight", "module.0.bias", "module.2.weight", "module.2.bias"]
    assert result["explained_by_prefix"] == "module." and result["prefix_on"] == "reference"
    assert result["matches"] is False


def test_different_hidden_size_gives_shape_mismatches(ckpts: Path, make_ctx) -> None:
    result = check({"path": str(ckpts / "weights.pt"), "reference": str(ckpts / "wide.pt")}, make_ctx)
    assert result["missing_count"] == 0 and result["unexpected_count"] == 0
    assert result["shape_mismatches"] == [
        {"key": "0.weight", "checkpoint": [8, 4], "reference": [16, 4]},
        {"key": "0.bias", "checkpoint": [8], "reference": [16]},
        {"key": "2.weight", "checkpoint": [2, 8], "reference": [2, 16]},
    ]
    assert result["explained_by_prefix"] is None and result["matches"] is False


def test_weights_only_refusal_and_allow_pickle(ckpts: Path, make_ctx) -> None:
    refused = check({"path": str(ckpts / "numpy_rng.pt")}, make_ctx)
    assert refused["available"] is True
    assert refused["weights_only_failed"] is True and refused["loaded_with_pickle"] is False
    assert refused["weights_only_error"].startswith("WeightsUnpickler error: Unsupported global")
    assert "numpy" in refused["weights_only_error"]
    assert "allow_pickle" in refused["reason"]
    assert refused["num_tensors"] == 0 and refused["corrupt"] is False
    loaded = check({"path": str(ckpts / "numpy_rng.pt"), "allow_pickle": True}, make_ctx)
    assert loaded["weights_only_failed"] is True and loaded["loaded_with_pickle"] is True
    assert loaded["reason"] is None
    assert loaded["state_dict_key"] == "model" and loaded["num_tensors"] == 4
    assert loaded["has"] == {"optimizer": False, "scheduler": False, "rng": True, "step": True}
    assert loaded["step_value"] == 3 and loaded["incomplete_resume"] is True


def test_distributed_checkpoint_directory(ckpts: Path, make_ctx) -> None:
    result = check({"path": str(ckpts / "dcp"), "reference": str(ckpts / "weights.pt")}, make_ctx)
    assert result["format"] == "dcp" and result["files"] == [str(ckpts / "dcp")]
    assert result["size_bytes"] == sum(p.stat().st_size for p in (ckpts / "dcp").iterdir())
    assert result["top_level_keys"] == ["model", "optimizer", "step"]
    assert result["state_dict_key"] == "model" and result["num_tensors"] == 4
    assert result["has"] == {"optimizer": True, "scheduler": False, "rng": False, "step": True}
    assert result["incomplete_resume"] is True  # no scheduler, no RNG state
    assert result["weights_only_failed"] is False  # .metadata read by the restricted unpickler
    assert result["matches"] is True


# -- no torch needed -----------------------------------------------------------------------------


def test_dcp_without_metadata_never_finished(ckpts: Path, tmp_path: Path, make_ctx) -> None:
    shutil.copy(ckpts / "dcp" / "__0_0.distcp", tmp_path / "__0_0.distcp")
    result = check({"path": str(tmp_path)}, make_ctx)
    assert result["format"] == "dcp" and result["corrupt"] is True
    assert "no .metadata" in result["load_error"]


def test_partially_written_zip_is_corrupt(ckpts: Path, make_ctx) -> None:
    result = check({"path": str(ckpts / "partial.pt")}, make_ctx)
    assert result["corrupt"] is True and result["format"] == "torch"
    assert "partially written" in result["load_error"]
    assert result["reason"].startswith("corrupt: partial.pt")
    assert result["torch_version"] is None  # found without loading torch at all


def test_empty_file_is_corrupt(tmp_path: Path, make_ctx) -> None:
    (tmp_path / "model.pt").write_bytes(b"")
    result = check({"path": str(tmp_path / "model.pt")}, make_ctx)
    assert result["corrupt"] is True and "empty file" in result["load_error"]


def test_safetensors_read_from_the_header(tmp_path: Path, make_ctx) -> None:
    write_safetensors(tmp_path / "model.safetensors", {"module.w": [3, 2], "module.b": [3]})
    write_safetensors(tmp_path / "ref.safetensors", {"w": [3, 2], "b": [4]})
    result = check({"path": str(tmp_path / "model.safetensors"),
                    "reference": str(tmp_path / "ref.safetensors")}, make_ctx)
    assert result["format"] == "safetensors" and result["torch_version"] is None
    assert result["num_tensors"] == 2 and result["num_params"] == 9
    assert result["prefixes"] == ["module."] and result["state_dict_key"] == ""
    assert result["explained_by_prefix"] == "module." and result["prefix_on"] == "checkpoint"
    assert result["shape_mismatches"] == [{"key": "b", "checkpoint": [3], "reference": [4]}]
    assert result["incomplete_resume"] is True


def test_truncated_safetensors_is_corrupt(tmp_path: Path, make_ctx) -> None:
    write_safetensors(tmp_path / "model.safetensors", {"w": [64, 64]}, cut=100)
    result = check({"path": str(tmp_path / "model.safetensors")}, make_ctx)
    assert result["corrupt"] is True and "truncated" in result["load_error"]


def test_huggingface_trainer_directory(tmp_path: Path, make_ctx) -> None:
    step = tmp_path / "checkpoint-500"
    step.mkdir()
    write_safetensors(step / "model.safetensors", {"w": [2, 2]})
    for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth"):
        (step / name).write_bytes(b"not loaded")
    (step / "trainer_state.json").write_text(json.dumps({"global_step": 500}))
    result = check({"path": str(step)}, make_ctx)
    assert result["path"] == str(step) and result["files"] == [str(step / "model.safetensors")]
    assert result["has"] == {"optimizer": True, "scheduler": True, "rng": True, "step": True}
    assert result["step_value"] == 500 and result["incomplete_resume"] is False
    (step / "optimizer.pt").unlink()
    assert check({"path": str(step)}, make_ctx)["incomplete_resume"] is True


def test_sharded_safetensors_are_read_together(tmp_path: Path, make_ctx) -> None:
    write_safetensors(tmp_path / "model-00001-of-00002.safetensors", {"a.w": [4, 4]})
    write_safetensors(tmp_path / "model-00002-of-00002.safetensors", {"b.w": [2]})
    result = check({"path": str(tmp_path)}, make_ctx)
    assert len(result["files"]) == 2 and result["num_tensors"] == 2 and result["num_params"] == 18
    assert result["has"]["optimizer"] is False and result["incomplete_resume"] is True


def test_glob_picks_the_newest_and_missing_paths(tmp_path: Path, make_ctx) -> None:
    old = write_safetensors(tmp_path / "step_100.safetensors", {"w": [1]})
    write_safetensors(tmp_path / "step_200.safetensors", {"w": [2]})
    os.utime(old, (time.time() + 60, time.time() + 60))
    assert check({"path": str(tmp_path / "step_*.safetensors")}, make_ctx)["path"] == str(old)
    missing = check({"path": str(tmp_path / "nope_*.pt")}, make_ctx)
    assert missing["exists"] is False and missing["reason"].startswith("nothing matches")
    (tmp_path / "empty").mkdir()
    assert "no weight file" in check({"path": str(tmp_path / "empty")}, make_ctx)["reason"]


def _python_without_torch() -> str | None:
    for candidate in ("/usr/bin/python3", shutil.which("python3")):
        if candidate and subprocess.run([candidate, "-c", "import torch"], capture_output=True,
                                        timeout=60).returncode != 0:
            return candidate
    return None


def test_torch_missing_is_unavailable_not_an_error(ckpts: Path, make_ctx) -> None:
    python = _python_without_torch()
    if python is None:
        pytest.skip("every python here has torch")
    result = check({"path": str(ckpts / "full.pt"), "python": python}, make_ctx)
    assert result["available"] is False
    assert result["reason"].startswith(f"torch not importable by {python}: ModuleNotFoundError")
    assert result["format"] == "torch" and result["size_bytes"] > 0


def test_a_hanging_load_is_killed(ckpts: Path, tmp_path: Path, make_ctx) -> None:
    sleeper = tmp_path / "python"
    sleeper.write_text("#!/bin/sh\nsleep 30\n")
    sleeper.chmod(sleeper.stat().st_mode | stat.S_IXUSR)
    start = time.monotonic()
    result = check({"path": str(ckpts / "full.pt"), "python": str(sleeper)}, make_ctx, timeout=1.5)
    assert time.monotonic() - start < 5
    assert result["timed_out"] is True and "killed" in result["reason"]


# -- in-process: the worker's layout detection, and the key comparison ---------------------------


def load(path: Path, **opts: Any) -> dict[str, Any]:
    return _checkpoint_worker.load_files(torch, [str(path)], {"weights_only": True, **opts})


def test_layouts_of_common_trainers(tmp_path: Path) -> None:
    state = make_model().state_dict()
    torch.save({"state_dict": state, "optimizer_states": [{}], "lr_schedulers": [{}], "global_step": 7,
                "epoch": 1}, tmp_path / "lightning.ckpt")
    lightning = load(tmp_path / "lightning.ckpt")
    assert lightning["state_dict_key"] == "state_dict" and lightning["step_value"] == 7
    assert lightning["has"] == {"optimizer": True, "scheduler": True, "rng": False, "step": True}
    torch.save({"module": state, "global_steps": torch.tensor(9), "optimizer": None},
               tmp_path / "mp_rank_00_model_states.pt")
    deepspeed = load(tmp_path / "mp_rank_00_model_states.pt")
    assert deepspeed["state_dict_key"] == "module" and deepspeed["step_value"] == 9
    assert deepspeed["has"]["optimizer"] is False  # saved as None: not there
    torch.save({"net": state, "iteration": 5}, tmp_path / "custom.pt")
    assert load(tmp_path / "custom.pt")["state_dict_key"] == "net"
    torch.save({"model": state, "rng_state": torch.get_rng_state()}, tmp_path / "two.pt")
    assert load(tmp_path / "two.pt")["state_dict_key"] == "model"  # not "a state dict with 1 tensor"


def test_dcp_metadata_refuses_foreign_globals(tmp_path: Path) -> None:
    (tmp_path / ".metadata").write_bytes(pickle.dumps(collections.Counter(a=1)))
    refused = load(tmp_path)
    assert refused["weights_only_failed"] is True
    assert refused["weights_only_error"] == (
        "WeightsUnpickler error: Unsupported global: GLOBAL collections.Counter")
    loaded = load(tmp_path, allow_pickle=True)  # a Counter has no state_dict_metadata: no keys
    assert loaded["loaded_with_pickle"] is True and loaded["shapes"] == {}


def test_a_pickled_module_needs_allow_pickle(tmp_path: Path) -> None:
    torch.save(make_model(), tmp_path / "whole.pt")
    refused = load(tmp_path / "whole.pt")
    assert refused["weights_only_failed"] is True and refused["shapes"] == {}
    loaded = load(tmp_path / "whole.pt", allow_pickle=True)
    assert loaded["loaded_with_pickle"] is True and loaded["state_dict_key"] == ""
    assert loaded["shapes"]["0.weight"] == [8, 4]


def test_reference_built_from_a_class_on_the_meta_device(ckpts: Path) -> None:
    built = _checkpoint_worker.build_reference(
        torch, {"target": "refmodels:Net", "kwargs": {"hidden": 3}, "pythonpath": str(ckpts)})
    assert built["load_error"] is None
    assert built["shapes"]["body.0.weight"] == [3, 4]
    broken = _checkpoint_worker.build_reference(torch, {"target": "no_such_module_xyz:build"})
    assert broken["load_error"].startswith("ModuleNotFoundError")
    sys.modules.pop("refmodels", None)


def test_compare_and_prefixes() -> None:
    plain = {"a.w": [2], "b.w": [3]}
    ddp_compiled = {"module._orig_mod.a.w": [2], "module._orig_mod.b.w": [3]}
    assert checkpoint.common_prefixes(list(ddp_compiled)) == ["module.", "_orig_mod."]
    assert checkpoint.common_prefixes(["model.x", "lm_head.w"]) == []
    both = checkpoint.compare(ddp_compiled, plain)
    assert both["explained_by_prefix"] == "module._orig_mod." and both["prefix_on"] == "checkpoint"
    hf = checkpoint.compare({"model.x": [1], "lm_head.w": [2]}, {"x": [1], "lm_head.w": [2]})
    assert hf["explained_by_prefix"] == "model."
    same = checkpoint.compare(plain, dict(plain))
    assert same["matches"] is True and same["explained_by_prefix"] is None
    many = checkpoint.compare({f"k{i}": [1] for i in range(80)}, {})
    assert many["unexpected_count"] == 80 and len(many["unexpected_keys"]) == 50
    assert checkpoint.compare(plain, {"c.w": [1]})["explained_by_prefix"] is None
