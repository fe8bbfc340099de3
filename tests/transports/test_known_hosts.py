"""_known_hosts.py: whether known_hosts holds a node's ECDSA P-256 key, read as ssh reads it."""

from __future__ import annotations

import base64
import hashlib
import hmac
from pathlib import Path

from runbook.transports import _known_hosts as kh

EC = "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBEXAMPLE="
ED = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEXAMPLE"


def hashed_name(host: str, salt: bytes, port: int = 22) -> str:
    """A hashed known_hosts name for `host`, as `ssh-keygen -H` writes it."""
    name = host if port == 22 else f"[{host}]:{port}"
    digest = hmac.new(salt, name.encode(), hashlib.sha1).digest()
    return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"


def known(tmp_path: Path, *lines: str) -> kh.KnownHosts:
    path = tmp_path / "known_hosts"
    path.write_text("\n".join(lines) + "\n")
    return kh.KnownHosts.read([path, tmp_path / "missing"])


def test_plain_names_ports_and_other_types(tmp_path: Path) -> None:
    hosts = known(tmp_path, "# a comment", "", f"gpu01,10.0.0.1 {EC}", f"gpu02 {ED}",
                  f"[gpu03]:2222 {EC}", f"GPU04 {EC} root@gpu04")
    assert hosts.prefers("gpu01") and hosts.prefers("10.0.0.1") and hosts.prefers("gpu01", 22)
    assert not hosts.prefers("gpu02")  # only its ed25519 key is known: ssh's choice stands
    assert hosts.prefers("gpu03", 2222) and not hosts.prefers("gpu03", 2200)
    assert hosts.prefers("gpu03")  # the port is the config's, unknown here: a plain entry's port will do
    assert not hosts.prefers("gpu01", 2222)
    assert hosts.prefers("gpu04")  # names compare without case, as ssh's do
    assert not hosts.prefers("gpu05")


def test_hashed_names_as_ssh_keygen_writes_them(tmp_path: Path) -> None:
    hosts = known(tmp_path, f"{hashed_name('gpu01', b'0123456789abcdefghij')} {EC}",
                  f"{hashed_name('gpu02', b'another salt 20bytes', 2222)} {EC}",
                  f"{hashed_name('gpu03', b'a third salt 20bytes')} {ED}", "|1|not base64|!! " + EC)
    assert hosts.prefers("gpu01") and hosts.prefers("gpu02", 2222)
    assert not hosts.prefers("gpu02") and not hosts.prefers("gpu03") and not hosts.prefers("gpu04")


def test_patterns_and_negations(tmp_path: Path) -> None:
    hosts = known(tmp_path, f"gpu*,!gpu13 {EC}", f"node?? {EC}", f"[rack?-*]:2222 {EC}")
    assert hosts.prefers("gpu01") and hosts.prefers("gpu-a") and not hosts.prefers("gpu13")
    assert hosts.prefers("node07") and not hosts.prefers("node7")
    # brackets are literal, as in ssh (fnmatch would read `[rack?-*]` as a character class)
    assert hosts.prefers("rack1-gpu01", 2222) and not hosts.prefers("r", 2222)


def test_certificates_revocations_and_huge_hashed_files_are_left_to_ssh(tmp_path: Path) -> None:
    assert not known(tmp_path, f"gpu01 {EC}", f"@cert-authority *.example.org {EC}").prefers("gpu01")
    assert not known(tmp_path, f"gpu01 {EC}", f"@revoked gpu09 {ED}").prefers("gpu01")
    many = [f"{hashed_name(f'h{i}', i.to_bytes(20, 'big'))} {EC}" for i in range(kh.MAX_HASHED + 1)]
    assert not known(tmp_path, f"gpu01 {EC}", *many).prefers("gpu01")


def test_the_files_ssh_reads_come_from_ssh_g(tmp_path: Path) -> None:
    output = (f"hostname 10.0.0.1\nuserknownhostsfile {tmp_path}/a {tmp_path}/b\n"
              "globalknownhostsfile /etc/ssh/ssh_known_hosts\n")
    assert kh.files_from_ssh_g(output) == [tmp_path / "a", tmp_path / "b", Path("/etc/ssh/ssh_known_hosts")]
    assert kh.files_from_ssh_g(output + "hostkeyalias gpu-alias\n") is None  # ssh looks up the alias
    assert kh.files_from_ssh_g("userknownhostsfile none\nglobalknownhostsfile none\n") is None
