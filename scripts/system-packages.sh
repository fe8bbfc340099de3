#!/usr/bin/env bash
# System packages the tests and benchmarks drive for real: OpenSSH's sshd (the loopback
# test cluster), util-linux (unshare/nsenter), procps, parallel-ssh (bench/fanout), Prometheus'
# Alertmanager (the alert receiver's tests start their own on loopback), and Chromium with its
# WebDriver plus a CJK font (the site's browser tests and screenshots).
# Installs only what is missing, and only as root; otherwise says what to install.
set -euo pipefail
need=()
command -v /usr/sbin/sshd >/dev/null 2>&1 || need+=(openssh-server)
command -v ssh-keygen >/dev/null 2>&1 || need+=(openssh-client)
command -v unshare >/dev/null 2>&1 || need+=(util-linux)
command -v ps >/dev/null 2>&1 || need+=(procps)
command -v parallel-ssh >/dev/null 2>&1 || need+=(pssh)
command -v /usr/sbin/slurmctld >/dev/null 2>&1 || need+=(slurm-wlm)
command -v /usr/sbin/munged >/dev/null 2>&1 || need+=(munge)
command -v prometheus-alertmanager >/dev/null 2>&1 || need+=(prometheus-alertmanager)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need+=(chromium-driver)
fc-list 2>/dev/null | grep -qi 'wqy\|noto.*cjk' || need+=(fonts-wqy-microhei)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "note: install these for the SSH and browser tests and the benchmarks: sudo apt-get install ${need[*]}" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
if [[ " ${need[*]} " == *" prometheus-alertmanager "* ]] && command -v systemctl >/dev/null 2>&1; then
  # The package starts a system Alertmanager on :9093/:9094; the tests need none of it.
  systemctl disable --now prometheus-alertmanager >/dev/null 2>&1 || true
fi
echo "installed: ${need[*]}"
