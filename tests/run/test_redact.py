"""Redaction: environment names, secret shapes in text, URLs, extra patterns, JSON data."""

from __future__ import annotations

import json
import random
import string
import time

import pytest

from runbook.run.redact import REDACTED, Redactor, is_secret_env_name, is_secret_text_name


@pytest.mark.parametrize("name", ["HF_TOKEN", "WANDB_API_KEY", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD",
                                  "hf_token", "MyPasswordFile", "TOKENIZERS_PARALLELISM", "SSH_KEYFILE"])
def test_environment_names_containing_a_secret_word_are_secret(name: str) -> None:
    assert is_secret_env_name(name)


@pytest.mark.parametrize("name", ["NCCL_IB_HCA", "NCCL_DEBUG", "MASTER_ADDR", "CUDA_VISIBLE_DEVICES",
                                  "WORLD_SIZE", "PATH"])
def test_other_environment_names_are_not(name: str) -> None:
    assert not is_secret_env_name(name)


def test_env_values_are_hidden_by_name_and_urls_keep_their_user() -> None:
    r = Redactor()
    assert r.env("HF_TOKEN", "hf_abc") == REDACTED
    assert r.env("NCCL_IB_HCA", "mlx5_0,mlx5_1") == "mlx5_0,mlx5_1"
    assert r.env("PIP_INDEX_URL", "https://alice:s3cret@pypi.example/simple") == \
        "https://alice:***@pypi.example/simple"


@pytest.mark.parametrize(("name", "secret"), [
    ("api_key", True), ("hfToken", True), ("AWS_SECRET_ACCESS_KEY", True), ("wandb.api_key", True),
    ("password", True), ("key", True), ("max_tokens", False), ("tokenizer", False),
    ("KeyError", False), ("num_keys", False), ("learning_rate", False),
])
def test_the_text_rule_spares_words_that_only_begin_with_a_secret_word(name: str, secret: bool) -> None:
    assert is_secret_text_name(name) is secret


@pytest.mark.parametrize(("text", "expected"), [
    ("AWS_SECRET_ACCESS_KEY=plantedAWS789", f"AWS_SECRET_ACCESS_KEY={REDACTED}"),
    ("export HF_TOKEN='hf_x y'", f"export HF_TOKEN='{REDACTED}'"),
    ('{"api_key": "abc", "NCCL_DEBUG": "INFO"}', f'{{"api_key": "{REDACTED}", "NCCL_DEBUG": "INFO"}}'),
    ("{'secret': 'x', 'lr': 3}", f"{{'secret': '{REDACTED}', 'lr': 3}}"),
    ("  password: correct horse battery", f"  password: {REDACTED}"),
    ("login token=abc user=bob step=3", f"login token={REDACTED} user=bob step=3"),
    ('api_key = "abc"  # toml', f'api_key = "{REDACTED}"  # toml'),
    ("python train.py --hf_token abc --lr 3", f"python train.py --hf_token {REDACTED} --lr 3"),
    ("python train.py --api-key=abc --lr 3", f"python train.py --api-key={REDACTED} --lr 3"),
    ("GET https://user:planted-pass@example.invalid/x", "GET https://user:***@example.invalid/x"),
    ("git clone https://ghp_abcdef@github.com/o/r", "git clone https://***@github.com/o/r"),
    ("redis://:p@ss@cache:6379/0", "redis://:***@cache:6379/0"),
    ("Authorization: Bearer abcdefghijklmnop", f"Authorization: Bearer {REDACTED}"),
    ("max_tokens: 2048, tokenizer: /models/llama", "max_tokens: 2048, tokenizer: /models/llama"),
    ("KeyError: 'module.weight'", "KeyError: 'module.weight'"),
    ("step 10 | loss 2.1 | Token buffer: 500/65537", "step 10 | loss 2.1 | Token buffer: 500/65537"),
    ("see https://example.com:8080/path and http://host/a@b", "see https://example.com:8080/path and "
                                                               "http://host/a@b"),
    ("NCCL_IB_HCA=mlx5_0 NCCL_DEBUG=INFO", "NCCL_IB_HCA=mlx5_0 NCCL_DEBUG=INFO"),
])
def test_secret_shapes_in_text(text: str, expected: str) -> None:
    assert Redactor().text(text) == expected


def test_redaction_is_idempotent() -> None:
    r = Redactor([r"password is (\S+)"])
    for text in ("HF_TOKEN=abc", "https://u:p@h/x", '"key": "v"', "--api-key v", "password is x y"):
        once = r.text(text)
        assert r.text(once) == once


def test_extra_patterns_hide_the_match_or_only_its_groups() -> None:
    r = Redactor([r"hf_[A-Za-z0-9]{6,}", r"password is (\S+)"])
    assert r.text("token hf_abcdefgh here") == f"token {REDACTED} here"
    assert r.text("the password is hunter2 ok") == f"the password is {REDACTED} ok"


def test_a_bad_extra_pattern_is_one_line() -> None:
    with pytest.raises(ValueError, match=r"--redact '\(': not a valid regular expression"):
        Redactor(["("])


def test_json_data_stays_valid_json() -> None:
    data = {"vars": {"HF_TOKEN": "x", "NCCL_DEBUG": "INFO"}, "api_key": 12345, "has_token": True,
            "runs": [{"url": "https://a:b@h/"}], "max_tokens": 2048}
    out = Redactor().data(data)
    assert json.loads(json.dumps(out)) == {
        "vars": {"HF_TOKEN": REDACTED, "NCCL_DEBUG": "INFO"}, "api_key": REDACTED, "has_token": True,
        "runs": [{"url": "https://a:***@h/"}], "max_tokens": 2048}


def test_large_text_is_redacted_in_linear_time() -> None:
    rng = random.Random(4)
    text = "a" * 200_000 + "\n" + "a." * 100_000 + "\n" + "".join(
        rng.choice(string.printable) for _ in range(1_000_000))
    begin = time.monotonic()
    Redactor().text(text)
    assert time.monotonic() - begin < 5
