#!/bin/sh
# run.sh HARNESS SEEDS SCRATCH SECONDS [DICT]: fuzz HARNESS for SECONDS over a fresh copy of
# SEEDS in SCRATCH (new inputs and crash artifacts go there, never into the source tree).
# Exit status: libFuzzer's (non-zero on a crash, sanitizer report, leak or a run over 60 s).
set -eu
bin=$1 seeds=$2 scratch=$3 secs=$4 dict=${5:-}
rm -rf "$scratch"
mkdir -p "$scratch/corpus" "$scratch/artifacts"
[ -d "$seeds" ] && cp "$seeds"/* "$scratch/corpus/" 2>/dev/null || true
set -- -max_total_time="$secs" -timeout=60 -rss_limit_mb=4096 -print_final_stats=1 \
	-artifact_prefix="$scratch/artifacts/"
[ -n "$dict" ] && set -- "$@" -dict="$dict"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
exec "$bin" "$@" "$scratch/corpus"
