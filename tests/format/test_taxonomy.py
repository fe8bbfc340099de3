"""The packaged taxonomy is the truth; the shared file was its starting point.

Ids are never renamed or reused, so every id the shared file had is still in the package, in
the same group and with the same meaning. The package may add ids.
"""

from pathlib import Path

import yaml

from runbook.format import taxonomy


def _shared_categories() -> dict[str, tuple[str, dict]] | None:
    shared = Path(__file__).resolve().parents[3] / "shared" / "taxonomy.yaml"
    if not shared.exists():  # the shared folder sits beside the checkout in CI and here
        return None
    doc = yaml.safe_load(shared.read_text("utf-8")) or {}
    return {cid: (group, body) for group, entries in doc.items() for cid, body in entries.items()}


def test_no_id_of_the_starting_taxonomy_is_renamed_or_reused() -> None:
    packaged = taxonomy.load()
    assert "hang.dataloader" in packaged
    shared = _shared_categories()
    if shared is None:
        return
    for cid, (group, body) in shared.items():
        assert cid in packaged, f"{cid} was removed or renamed"
        assert packaged[cid].group == group, f"{cid} moved from {group}"
        assert packaged[cid].en == body["en"], f"{cid} changed its meaning"


def test_the_package_adds_its_own_ids() -> None:
    """The two checkpoint ids came after the starting point: the package is not a copy."""
    packaged = taxonomy.load()
    assert {"checkpoint.not-gathered", "checkpoint.concurrent-writers"} <= set(packaged)
    for category in packaged.values():
        assert category.en and category.zh, f"{category.id} lacks a language"
