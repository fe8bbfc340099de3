"""Terminal padding by display width: half our text is Chinese."""

from runbook.i18n.textwidth import pad, width


def test_cjk_characters_take_two_columns() -> None:
    assert width("训练卡住") == 8
    assert width("GPU 利用率") == 10
    assert width("\x1b[31mred\x1b[0m") == 3


def test_padding_lines_up_mixed_text() -> None:
    rows = [pad(name, 12) + "|" for name in ("node01", "节点一号", "gpu-驱动")]
    assert {width(row) for row in rows} == {13}

