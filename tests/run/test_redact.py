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


PEM = ("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAplanted0123456789abcdef\nplantedTail==\n"
       "-----END RSA PRIVATE KEY-----")


@pytest.mark.parametrize(("text", "secret"), [
    (f"loaded key:\n{PEM}\nstep 3", "planted"),
    ('{"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIplantedGcp==\\n-----END PRIVATE KEY-----\\n"}',
     "planted"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktplanted\n(cut here)", "planted"),
    ("using AKIAPLANTED23456789Q for s3", "AKIAPLANTED23456789Q"),
    ("key=AIzaSyPlanted0123456789abcdefghijklmno x", "AIzaSyPlanted"),
    ("token ya29.a0Planted0123456789abcdef in header", "ya29.a0Planted"),
    ("huggingface-cli login hf_PlantedToken0123456789abcdefghij", "hf_PlantedToken"),
    ("curl -H 'Authorization: Basic dXNlcjpwbGFudGVk' https://x", "dXNlcjpwbGFudGVk"),
    ("-H 'authorization: token ghp_Planted0123456789abcdefghijklmnop'", "ghp_Planted"),
    ("args: Namespace(hf_token='plantedNs', lr=3)", "plantedNs"),
    ("config: {token: plantedFlow}", "plantedFlow"),
    ("HF_TOKENS=plantedEnvStyle other=1", "plantedEnvStyle"),
    ("postgres://app:planted/Pass@db.internal:5432/x", "planted/Pass"),
    ("SecretAccessKey=x  Bearer plantedPadded=", "plantedPadded"),
])
def test_more_secret_shapes_in_text(text: str, secret: str) -> None:
    redactor = Redactor()
    once = redactor.text(text)
    assert secret not in once, once
    assert redactor.text(once) == once


@pytest.mark.parametrize("text", [
    "http://host:8080/a@b", "https://medium.com/@alice", "max_tokens: 2048, tokenizer: bpe",
    "step 10 | loss 2.1 | Token buffer: 500/65537", "sha 0123456789abcdef0123456789abcdef01234567",
    "task-0123456789abcdefghijklmnop done",
    "-----BEGIN CERTIFICATE-----\nMIIBplanted\n-----END CERTIFICATE-----",
])
def test_what_only_looks_like_a_secret_stays(text: str) -> None:
    assert Redactor().text(text) == text


def test_a_key_split_over_the_lines_of_a_list_is_hidden() -> None:
    """A log check's tail is a list of lines: each body line alone has no shape."""
    tail = ["step 1", *PEM.split("\n"), "step 2"]
    out = Redactor().data({"tail": tail})["tail"]
    assert not any("planted" in line for line in out), out
    assert out[0] == "step 1" and out[-1] == "step 2" and len(out) == len(tail)
    assert Redactor().data({"tail": out})["tail"] == out


def test_secret_parameter_values_are_hidden_wherever_they_show() -> None:
    redactor = Redactor.for_params({"hf_token": "plantedValue9", "log": "/var/log/train.log", "key": "x"})
    assert redactor.text("echo plantedValue9 > /var/log/train.log") == f"echo {REDACTED} > /var/log/train.log"
    assert redactor.values == ["plantedValue9"]  # a one-letter value would hide every x


@pytest.mark.parametrize("text", ["x://a:" * 100_000, "https://u:" + "a/" * 300_000, "TOKEN_" * 200_000,
                                  "a--" * 300_000, "-----BEGIN PRIVATE KEY-----" * 30_000,
                                  "authorization: " * 60_000, "Bearer " * 150_000, '"key":' * 150_000])
def test_hostile_text_is_redacted_in_linear_time(text: str) -> None:
    begin = time.monotonic()
    Redactor().text(text)
    assert time.monotonic() - begin < 5


def test_a_shared_answer_is_redacted_once_and_as_its_copies_are() -> None:
    """A report of many nodes holds each distinct answer once; redacting it once per object
    gives what redacting each node's own copy gives, secrets hidden in every place it shows."""
    import copy

    token = "hf_" + "Z" * 34
    answer = {"last": f"login with {token}", "password": "hunter22", "lines": ["ok", f"Bearer {token}"]}
    shared = {"nodes": [{"node": f"n{i}", "result": answer} for i in range(3)], "again": answer}
    copies = copy.deepcopy(shared)
    out = Redactor().data(shared)
    assert out == Redactor().data(copies)
    assert token not in json.dumps(out) and "hunter22" not in json.dumps(out)
    assert out["nodes"][0]["result"] is out["nodes"][2]["result"]  # one copy, as the input had
    assert shared["nodes"][0]["result"]["password"] == "hunter22"  # the input is left as it was


def test_a_full_memo_keeps_the_strings_it_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    """A report of 100,000 nodes writes 100,000 names: once the memo is full it stops growing
    and keeps the strings seen first (the titles and texts every node repeats)."""
    from runbook.run import redact

    monkeypatch.setattr(redact, "TEXT_MEMO_MAX", 3)
    redactor = Redactor()
    redactor.text("The log stopped")
    for i in range(10):
        assert redactor.text(f"gpu{i:05d} password=hunter{i}") == f"gpu{i:05d} password={REDACTED}"
    assert len(redactor._texts) == 3 and "The log stopped" in redactor._texts
