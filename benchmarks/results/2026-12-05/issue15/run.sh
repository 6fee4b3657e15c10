#!/usr/bin/env bash
# Issue 15's benchmark section in one script: every row of the issue, every contender of a table in
# the same JMH invocation, on one machine. About 31 minutes on 2 quiet cores (estimated from a
# SMOKE run's per-fork overhead; each group prints its start time to OUTDIR/progress.txt). Run it from anywhere; it builds the JMH jar first unless NOBUILD=1.
#
#   benchmarks/results/2026-12-05/issue15/run.sh OUTDIR
#   python3 benchmarks/results/2026-12-05/issue15/summarize.py OUTDIR     # the issue's ratio table
#
# Headline rows (those in a target's ratio) run 2 forks (3 for the 2-thread mixed churn, whose forks
# differ most: PERFORMANCE item 12); extra rows 1 fork. Warm-up is 5 x 1 s for the churn rows (as in
# item 17's A/B, whose forks agreed within a few ns) and 2 x 1 s for copies. SMOKE=1 runs every
# group once, briefly, to check the script (its numbers mean nothing).
set -euo pipefail
out=${1:?usage: run.sh OUTDIR}
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
if [[ "${NOBUILD:-0}" != 1 ]]; then
    "$root/ferrum" mvn -q -Pbenchmarks -DskipTests install
fi
jar="$root/benchmarks/target/benchmarks.jar"
J=("$("$root/ferrum" java-home)/bin/java" --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow)

{
    date -u; uname -a; nproc; uptime
    "${J[0]}" -version 2>&1
    cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || true
    git -C "$root" log --oneline -1
} > "$out/environment.txt"

churn=(-wi 5 -w 1s -i 4 -r 1s)
copies=(-wi 2 -w 1s -i 2 -r 1s)
f2=2; f3=3
if [[ "${SMOKE:-0}" == 1 ]]; then # a check that every group runs, in a few minutes; numbers meaningless
    churn=(-wi 0 -i 1 -r 200ms); copies=(-wi 0 -i 1 -r 200ms); f2=1; f3=1
fi
heads='ferrumDirect|ferrumRouted|nettyAdaptive|nettyPooled|arrowUnsafe|malloc'

run() { # NAME JMH-ARGS...: one JMH invocation, its JSON and its log in OUTDIR
    local name=$1; shift
    echo "$(date -u +%T) $name" | tee -a "$out/progress.txt"
    "${J[@]}" -jar "$jar" "$@" -rf json -rff "$out/$name.json" > "$out/$name.txt" 2>&1
}

# 1. Workloads 1 and 6 with the touch (headline): allocate, touch one byte per 4 KiB, free.
run touch-1t "AllocTouchBenchmark.($heads)\$" -p size=64,4096,65536,mixed "${churn[@]}" -f $f2 -t 1
run touch-2t-mixed "AllocTouchBenchmark.($heads)\$" -p size=mixed "${churn[@]}" -f $f3 -t 2
# Extra rows: 2 MiB, the other ways to touch, statistics off (workload 6), allocate + free without
# the touch (the rows earlier tables reported), and the other sizes with 2 threads.
run touch-1t-extra "AllocTouchBenchmark.(ferrumDirectNoStats|ferrumDirectWrite|ferrumDirectMapUnmap)\$" \
    -p size=4096,mixed "${churn[@]}" -f 1 -t 1
run touch-1t-2m "AllocTouchBenchmark.($heads)\$" -p size=2097152 "${churn[@]}" -f 1 -t 1
run nottouch-1t "AllocFreeBenchmark.(ferrumDirect|nettyAdaptive|malloc)\$" \
    -p size=4096,mixed "${churn[@]}" -f 1 -t 1
run touch-2t-extra "AllocTouchBenchmark.($heads)\$" -p size=4096,2097152 "${churn[@]}" -f 1 -t 2

# 2. Transfers: write/read from heap and native memory, raw copies of the same memory, Netty, Arrow.
run transfers "TransferBenchmark.(ferrum(Write|Read)(Heap|Native)|raw(Write|Read)(Heap|Native)|(netty|arrow)SetBytes(Heap|Native))\$" \
    -p size=4096,1048576,268435456 "${copies[@]}" -f $f2
run transfers-small "TransferBenchmark.(ferrumCopyHandles|rawCopyViews|withMappedEmpty|arenaConfinedEmpty)\$" \
    -p size=4096 "${copies[@]}" -f $f2
# The 256 MiB copy with sources never written against written (PERFORMANCE item 18).
run largecopy LargeCopyBenchmark "${copies[@]}" -f 1

# 3. Virtual threads: 64 per invocation, mixed sizes, allocate + touch + free.
run vthreads VirtualThreadBenchmark -p contender=ferrumDirect,ferrumRouted,nettyAdaptive,nettyPooled,malloc \
    -p yield=false "${churn[@]}" -f $f2

# 4. Cross-thread free: one thread allocates and touches, another frees, through a 1024-slot ring.
run crossthread CrossThreadFreeBenchmark -p size=4096,65536 "${churn[@]}" -f $f2
# The control (PERFORMANCE item 18): the same pipeline, each buffer handed back and freed by its allocator.
run crossthread-owner CrossThreadFreeBenchmark -p contender=ferrumDirect,nettyAdaptive -p size=4096 -p freeBy=owner \
    "${churn[@]}" -f 1

echo "$(date -u +%T) done" | tee -a "$out/progress.txt"
python3 "$here/summarize.py" "$out" | tee "$out/summary.md"
