#!/usr/bin/env bash
# Runs the cargo-fuzz targets in fuzz/ for a fixed time each and prints libFuzzer's figures.
#
#   scripts/fuzz.sh                 # every target, 60 s each
#   scripts/fuzz.sh 600 ticket_event  # one target, 10 minutes
#
# Needs cargo-fuzz (`cargo install cargo-fuzz --locked`). On a stable toolchain the
# nightly-only flags cargo-fuzz passes are unlocked with RUSTC_BOOTSTRAP=1. The default
# sanitizer is `none`: the crates forbid unsafe code, so what the fuzzer looks for is
# panics, failed invariants, runaway memory and time; set SANITIZER=address for ASan.
# New interesting inputs go to fuzz/target/corpus/<target>/ (scratch; the committed seed
# corpus fuzz/corpus/<target>/ is only read — copy small, useful finds into it); a crash
# is written to fuzz/artifacts/<target>/ and reproduced with
#   RUSTC_BOOTSTRAP=1 cargo fuzz run -s none <target> fuzz/artifacts/<target>/<file>
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-60}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(invocation_payload ticket_event log_bounding)
fi
sanitizer="${SANITIZER:-none}"

export RUSTC_BOOTSTRAP=1
for target in "${targets[@]}"; do
    echo "== ${target}: ${seconds} s (sanitizer ${sanitizer})"
    # -rss_limit_mb: a parser that balloons on a small input is a finding too.
    status=0
    mkdir -p "fuzz/target/corpus/${target}"
    cargo fuzz run --sanitizer "${sanitizer}" "${target}" "fuzz/target/corpus/${target}" "fuzz/corpus/${target}" -- \
        -max_total_time="${seconds}" -max_len=65536 -rss_limit_mb=1024 -timeout=10 \
        -print_final_stats=1 >"fuzz/${target}.log" 2>&1 || status=$?
    grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss_mb|SUMMARY|thread .* panicked)' \
        "fuzz/${target}.log" || true
    if [ "${status}" -ne 0 ]; then
        echo "${target}: crash or failure (exit ${status}), see fuzz/${target}.log and fuzz/artifacts/${target}/" >&2
        exit 1
    fi
done
