#!/usr/bin/env bash
# Installs what the tests need on a fresh machine: the wasm target, the
# wasm-bindgen CLI at the version pinned in Cargo.lock, cargo-fuzz, Debian's Chromium
# and nginx with nchan, strace, the npm packages, and running PostgreSQL and Redis
# (scripts/setup-services.sh). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

rustup target add wasm32-unknown-unknown >/dev/null

# cargo-fuzz (libFuzzer) for scripts/fuzz.sh.
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --version 0.13.2 --locked

need_apt=()
command -v chromium >/dev/null || need_apt+=(chromium)
[ -e /usr/lib/nginx/modules/ngx_nchan_module.so ] || need_apt+=(nginx-light libnginx-mod-nchan)
command -v wasm-objdump >/dev/null || need_apt+=(wabt)
command -v strace >/dev/null || need_apt+=(strace)
if [ ${#need_apt[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

scripts/setup-services.sh

npm ci --prefix tests/js/pubb-minimal --no-audit --no-fund --silent

for hook in scripts/setup-js.sh; do
  if [ -x "$hook" ]; then "$hook"; fi
done
