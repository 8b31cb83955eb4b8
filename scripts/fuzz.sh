#!/usr/bin/env bash
# Builds the fuzz targets in fuzz/ with libFuzzer's coverage instrumentation, runs each
# for a fixed time and prints libFuzzer's figures.
#
#   scripts/fuzz.sh                     # every target, 60 s each
#   scripts/fuzz.sh 600 ticket_event    # one target, 10 minutes
#   scripts/fuzz.sh --ci 25             # what CI runs (see below)
#
# Plain cargo with the instrumentation flags cargo-fuzz passes, all of them stable rustc
# options: neither cargo-fuzz nor a nightly toolchain is needed. The crates forbid unsafe
# code, so what the fuzzer looks for is panics, failed invariants, runaway memory and
# time; SANITIZER=address adds ASan (a nightly-only flag, unlocked with RUSTC_BOOTSTRAP=1).
#
# --ci builds the targets that do not need the handler crate (ticket_event, log_bounding)
# with a quick-to-build profile: the handler crate's Azure SDK and HTTP stack make an
# instrumented build several times longer than CI's budget. The invocation decoder and
# the storm lab's history reader (history_export: the lab crate depends on the handler
# crate) are fuzzed by hand; in CI their corpora are replayed by
# handlers/tests/fuzz_corpus.rs and lab/tests/fuzz_corpus.rs.
#
# New interesting inputs go to fuzz/target/corpus/<target>/ (scratch; the committed seed
# corpus fuzz/corpus/<target>/ is only read: copy small, useful finds into it). A crash is
# written to fuzz/artifacts/<target>/ and reproduced by running the target's binary on it:
#   fuzz/target/<host triple>/release/<target> fuzz/artifacts/<target>/<file>
set -euo pipefail
cd "$(dirname "$0")/.."

profile=release
features=()
targets_by_default=(invocation_payload ticket_event log_bounding history_export)
if [ "${1:-}" = "--ci" ]; then
    shift
    profile=fuzz-ci
    features=(--no-default-features)
    targets_by_default=(ticket_event log_bounding)
fi
seconds="${1:-60}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=("${targets_by_default[@]}")
fi

flags="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4"
flags="$flags -Cllvm-args=-sanitizer-coverage-inline-8bit-counters"
flags="$flags -Cllvm-args=-sanitizer-coverage-pc-table"
flags="$flags -Cllvm-args=-sanitizer-coverage-trace-compares"
flags="$flags -Cllvm-args=-sanitizer-coverage-stack-depth"
flags="$flags --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
if [ "${SANITIZER:-none}" != none ]; then
    flags="$flags -Zsanitizer=${SANITIZER}"
    export RUSTC_BOOTSTRAP=1
fi
triple="$(rustc -vV | sed -n 's/^host: //p')"
bins=()
for target in "${targets[@]}"; do
    bins+=(--bin "$target")
done
# An explicit --target keeps the instrumentation out of build scripts and proc macros.
RUSTFLAGS="$flags" cargo build --manifest-path fuzz/Cargo.toml --locked --profile "$profile" \
    "${features[@]}" --target "$triple" "${bins[@]}"

for target in "${targets[@]}"; do
    corpus="fuzz/target/corpus/${target}"
    artifacts="fuzz/artifacts/${target}/"
    log="fuzz/${target}.log"
    mkdir -p "$corpus" "$artifacts"
    echo "== ${target}: ${seconds} s"
    status=0
    # -rss_limit_mb: a parser that balloons on a small input is a finding too.
    "fuzz/target/${triple}/${profile}/${target}" "$corpus" "fuzz/corpus/${target}" \
        -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=1024 -timeout=10 \
        -print_final_stats=1 -artifact_prefix="$artifacts" >"$log" 2>&1 || status=$?
    grep -E '^(Done [0-9]+ runs|stat::number_of_executed_units|stat::new_units_added|stat::peak_rss_mb|SUMMARY)|panicked' \
        "$log" || true
    if [ "$status" -ne 0 ]; then
        echo "${target}: crash or failure (exit ${status}), see ${log} and ${artifacts}" >&2
        tail -n 30 "$log" >&2
        exit 1
    fi
done
