"""Terminal padding by display width: half our text is Chinese."""

from runbook.textwidth import pad, width


def test_cjk_characters_take_two_columns() -> None:
    assert width("训练卡住") == 8
    assert width("GPU 利用率") == 10
    assert width("\x1b[31mred\x1b[0m") == 3


def test_padding_lines_up_mixed_text() -> None:
    rows = [pad(name, 12) + "|" for name in ("node01", "节点一号", "gpu-驱动")]
    assert {width(row) for row in rows} == {13}


def test_the_packaged_taxonomy_is_the_shared_one() -> None:
    from pathlib import Path

    from runbook import taxonomy

    shared = Path(__file__).resolve().parents[2] / "shared" / "taxonomy.yaml"
    packaged = Path(taxonomy.__file__).with_name("data") / "taxonomy.yaml"
    if shared.exists():  # the shared folder sits beside the checkout in CI and here
        assert packaged.read_text("utf-8") == shared.read_text("utf-8")
    assert "hang.dataloader" in taxonomy.load()
