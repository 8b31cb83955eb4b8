#!/usr/bin/env bash
# Shows that each fault-suite test needs the mechanism it covers: switches one mechanism
# off at a time (STORMGATE_TEST_DISABLE, honoured only by test builds with the
# `fault-injection` feature), runs the tests that cover it, and prints how they fail.
# Exits non-zero if a test still passes without its mechanism.
#
#   scripts/prove-fault-suite.sh                 # every mechanism (retry_bound takes ~5 min)
#   scripts/prove-fault-suite.sh lease_reclaim   # one
#
# docs/operations.md ("How the fault suite is proven") quotes a run of this script.
set -uo pipefail
cd "$(dirname "$0")/.."

# mechanism | test file (a module of the e2e test binary) | test name filter ('' for all of the file)
proofs=(
    "lease_reclaim|faults_crash|"
    "redis_aof|faults_redis|with_aof"
    "classify_failure|faults_redis|classify_fails"
    "classify_failure|faults_redis|a_link_cut"
    "classify_failure|faults_outage|"
    "ingest_dedup|faults_kafka|"
    "retry_jitter|faults_llm|"
    "retry_bound|faults_llm|"
    "extractive_fallback|faults_llm|"
    "fleet_cooldown|faults_llm|daily_quota"
    "work_note_outbox|faults_servicenow|"
    "delivery_ledger|faults_degraded|"
    "call_claims|faults_duplicate_handoff|"
)

cargo test -p stormgate-e2e --no-run --quiet 2>/dev/null || cargo test -p stormgate-e2e --no-run
unproven=0
for proof in "${proofs[@]}"; do
    IFS='|' read -r mechanism test filter <<<"$proof"
    if [ $# -gt 0 ] && [[ " $* " != *" ${mechanism} "* ]]; then
        continue
    fi
    echo "== ${mechanism} off: ${test} ${filter}"
    # The file's tests whose names contain the filter, run by their exact names.
    mapfile -t names < <(cargo test --quiet -p stormgate-e2e --test e2e -- --list --format terse 2>/dev/null |
        sed -n "s/^\(${test}::[^:]*${filter}[^:]*\): test\$/\1/p")
    if [ ${#names[@]} -eq 0 ]; then
        echo "   no test of ${test} matches '${filter}'"
        unproven=1
        continue
    fi
    log="$(mktemp)"
    if STORMGATE_TEST_DISABLE="$mechanism" RUST_BACKTRACE=0 \
        cargo test --quiet -p stormgate-e2e --test e2e -- --exact "${names[@]}" >"$log" 2>&1; then
        echo "   NOT PROVEN: the tests passed without ${mechanism}"
        unproven=1
    else
        # Each failing test: where it failed and the first line of its message.
        grep -A1 "panicked at" "$log" | grep -v '^--$' | cut -c1-400 | sed 's/^/   /'
    fi
    rm -f "$log"
    # Leftover working directories of failed rigs.
    rm -rf "${TMPDIR:-/tmp}"/stormgate-faults-*
done
exit "$unproven"
