#!/usr/bin/env bash
# The system packages the test suite needs, installed when missing (Debian/Ubuntu):
# redis-server (tests and `stormgate local` start their own on a free port), openssl (the
# rediss:// test makes its certificates), chromium (the storm lab's report is opened
# headless by one test) and chromium-driver (the console test drives Chromium through chromedriver).
# CI (.ci/run) runs this first; on a fresh machine run it once before
# `cargo test --workspace`.
set -euo pipefail

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
if [ "${#missing[@]}" -eq 0 ]; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "missing: ${missing[*]}; install them with your package manager" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "installing: ${missing[*]}"
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends "${missing[@]}"
