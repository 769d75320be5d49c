#!/usr/bin/env bash
# Runs the cargo-fuzz target `parse_beacon` (rm_schemas::parse_beacon) for N seconds
# and prints how many inputs were executed.
#
#   schemas/fuzz/run.sh [SECONDS] [extra libFuzzer flags...]     (default 60 seconds)
#
# cargo fuzz passes unstable flags to rustc (-Zsanitizer=address, -Cpasses=sancov...),
# so it needs a nightly compiler. The stable toolchain accepts them with
# RUSTC_BOOTSTRAP=1 (its AddressSanitizer runtime ships with rust-std), which is what
# runs by default: every machine of the project has stable. Set FUZZ_TOOLCHAIN=nightly
# to use an installed nightly instead. cargo-fuzz is installed when missing.
#
# Seeds (valid beacons of every shape) and a dictionary of the beacon's vocabulary are
# written on each run into the git-ignored fuzz/corpus and fuzz/target. A crash leaves
# its input in fuzz/artifacts/parse_beacon/ and makes this script exit non-zero;
# replay it with `cargo fuzz run parse_beacon <file>` (RUSTC_BOOTSTRAP=1 on stable).
set -euo pipefail

secs="${1:-60}"
[ "$#" -gt 0 ] && shift
case "$secs" in
'' | *[!0-9]*)
    echo "usage: $0 [SECONDS] [libFuzzer flags...]" >&2
    exit 2
    ;;
esac

here="$(cd "$(dirname "$0")" && pwd)"
target=parse_beacon
corpus="$here/corpus/$target"
dict="$here/target/$target.dict"
log="$here/target/$target.log"

if ! command -v cargo-fuzz >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

toolchain=()
if [ -n "${FUZZ_TOOLCHAIN:-}" ]; then
    toolchain=("+$FUZZ_TOOLCHAIN")
else
    export RUSTC_BOOTSTRAP=1
fi

mkdir -p "$corpus" "$here/target"

# Seeds: one valid beacon per requirement class, and the edge cases of the spec.
seed() { printf '%s' "$2" >"$corpus/seed-$1"; }
common='adId=ad-1&timestamp=2026-11-22T10%3A15%3A30.250Z&sessionId=s-1'
seed video "interactionType=videoPlay&$common&videoId=v-1&cb=[CACHEBUSTING]"
seed product "interactionType=productImpression&$common&productCode=p-1&catalogId=c-1"
seed click "interactionType=creativeClick&$common&creativeId=cr-1&iabConsentString=CPXx%2Bf%3D%3D"
seed cart "interactionType=cart&adId=ad-1&timestamp=2026-11-22T11:15:30%2B01:00&customerId=c-1&productCode=p-1&catalogId=c-1&units=3&conversionValue=12.50"
seed dtm "interactionType=videoComplete&adId=ad-1&timestamp=2026-11-22T05:15:30.123456789-05:00&dtmToken=d-1&videoId=v-1"
seed basic "interactionType=productClick&adId=ad-1&timestamp=2026-11-22T11:15:30%2B0100&sessionId=s&productCode=p&catalogId=c"
seed macro "interactionType=videoPlay&adId=ad-1&timestamp=[TIMESTAMP]&sessionId=s-1&videoId=v-1"
seed rawplus "interactionType=videoPlay&adId=ad-1&timestamp=2026-11-22T11:15:30+01:00&sessionId=s-1&videoId=v-1"

# Dictionary: parameter names, type names, separators, escapes, macros, time parts.
{
    for w in adId interactionType timestamp sessionId customerId dtmToken videoId \
        productCode catalogId creativeId units conversionValue iabConsentString \
        videoCreativeView videoPlay videoFirstQuartile videoMidpoint videoThirdQuartile \
        videoComplete videoSkip videoPause videoResume videoMute videoUnmute \
        productImpression productClick creativeClick cart \
        '[TIMESTAMP]' '[CACHEBUSTING]' '%5B' '%5D' '%2B' '%3A' '%C3%A9' '%FF' '%25' \
        '=' '&' '+' 'Z' '-05:00' '%2B01:00' '%2B0100' '.250' '.123456789' \
        '2026-11-22T10:15:30' '9999-12-31T23:59:59' '0000-01-01T00:00:00' ':60' \
        NaN inf 1e308 5e-324 -0 1000000 1000001; do
        printf '"%s"\n' "$w"
    done
} >"$dict"

cd "$here/.."
echo "fuzzing $target for ${secs}s (toolchain: ${FUZZ_TOOLCHAIN:-stable with RUSTC_BOOTSTRAP=1})"
set +e
cargo "${toolchain[@]}" fuzz run --debug-assertions "$target" "$corpus" -- \
    -max_total_time="$secs" -dict="$dict" -print_final_stats=1 "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e

runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
echo "executions: ${runs:-unknown} in ${secs}s; exit status $status (log: $log)"
exit "$status"
