"""The taxonomy shipped in the package is the shared one."""

from pathlib import Path

from runbook.format import taxonomy


def test_the_packaged_taxonomy_is_the_shared_one() -> None:
    shared = Path(__file__).resolve().parents[3] / "shared" / "taxonomy.yaml"
    packaged = Path(taxonomy.__file__).parents[1] / "data" / "taxonomy.yaml"
    if shared.exists():  # the shared folder sits beside the checkout in CI and here
        assert packaged.read_text("utf-8") == shared.read_text("utf-8")
    assert "hang.dataloader" in taxonomy.load()
