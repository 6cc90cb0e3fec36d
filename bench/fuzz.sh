#!/bin/sh
# Fuzzing campaign (tests/fuzz): every harness in turn for its share of DURATION seconds
# (default 600 = 10 min in all), with libFuzzer's -jobs/-workers set to the CPUs, over a
# scratch corpus seeded from tests/fuzz/corpus (kept between runs in bench/out/fuzz, never
# written into the source tree). Reports per harness: executions, exec/s, coverage (cov: and
# ft: from libFuzzer's final stats), corpus size and findings (crash/leak/timeout/oom
# artifacts); then the total.
# Usage: bench/fuzz.sh [DURATION] [HARNESS...]   (env JOBS: parallel jobs, default nproc;
# FUZZ_BUILD: the build directory, default bench/out/build-fuzz)
# Results: bench/out/fuzz.txt; artifacts in bench/out/fuzz/<harness>/artifacts.
set -eu
cd "$(dirname "$0")/.."
DURATION=${1:-600}
[ $# -gt 0 ] && shift
HARNESSES=${*:-fuzz_api fuzz_import fuzz_boot fuzz_agent fuzz_redfish fuzz_steps}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
OUT=bench/out
B=${FUZZ_BUILD:-$OUT/build-fuzz} # an existing RP_FUZZ build may be reused
mkdir -p "$OUT/fuzz"
CC=clang cmake -S . -B "$B" -DRP_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build "$B" -j "$JOBS" --target fuzz >/dev/null
B=$(cd "$B" && pwd)
n=$(echo $HARNESSES | wc -w)
each=$((DURATION / n))
[ "$each" -lt 10 ] && each=10
REPORT=$OUT/fuzz.txt
printf '%-14s %12s %9s %7s %8s %7s %8s\n' harness execs exec/s cov ft corpus findings | tee "$REPORT"
total=0 total_find=0
for h in $HARNESSES; do
	d=$OUT/fuzz/$h
	mkdir -p "$d/corpus" "$d/artifacts" "$d/logs"
	cp tests/fuzz/corpus/$h/* "$d/corpus/" 2>/dev/null || true
	rm -f "$d"/logs/*
	dict=""
	[ -f tests/fuzz/$h.dict ] && dict="-dict=$PWD/tests/fuzz/$h.dict"
	before=$(ls "$d/artifacts" | grep -cE "^(crash|leak|timeout|oom)-" || true)
	# Each job fuzzes for the whole share; libFuzzer writes job J's output to fuzz-J.log in
	# the working directory.
	(cd "$d/logs" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
		UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		"$B/tests/fuzz/$h" -jobs="$JOBS" -workers="$JOBS" -max_total_time="$each" \
		-timeout=60 -rss_limit_mb=4096 -print_final_stats=1 $dict \
		-artifact_prefix="$OLDPWD/$d/artifacts/" "$OLDPWD/$d/corpus" >/dev/null 2>&1) || true
	execs=0 rate=0 cov=0 ft=0
	for log in "$d"/logs/fuzz-*.log; do
		[ -f "$log" ] || continue
		e=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
		r=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
		c=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
		f=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
		execs=$((execs + ${e:-0}))
		rate=$((rate + ${r:-0}))
		[ "${c:-0}" -gt "$cov" ] && cov=$c
		[ "${f:-0}" -gt "$ft" ] && ft=$f
	done
	corpus=$(ls "$d/corpus" | wc -l)
	find=$(($(ls "$d/artifacts" | grep -cE "^(crash|leak|timeout|oom)-" || true) - before))
	total=$((total + execs))
	total_find=$((total_find + find))
	printf '%-14s %12d %9d %7d %8d %7d %8d\n' "$h" "$execs" "$rate" "$cov" "$ft" "$corpus" "$find" |
		tee -a "$REPORT"
done
printf '%-14s %12d %9s %7s %8s %7s %8d\n' total "$total" - - - - "$total_find" | tee -a "$REPORT"
echo "($JOBS jobs per harness, ${each}s each; artifacts: $OUT/fuzz/*/artifacts)" | tee -a "$REPORT"
[ "$total_find" -eq 0 ]
