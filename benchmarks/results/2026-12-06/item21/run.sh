#!/usr/bin/env bash
# PERFORMANCE item 21: virtual threads on shared caches picked by CPU, caching large blocks.
# old.json: the benchmark jar of the commit before (7308b25, built in a worktree, path as $1);
# new.json: this commit's. Same machine, one after the other.
set -euo pipefail
out=$(dirname "$0")
java=${JAVA:-java}
flags=(--enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow)
"$java" "${flags[@]}" -jar "$1" VirtualThreadBenchmark -p contender=ferrumDirect,nettyAdaptive -f 2 \
    -rf json -rff "$out/old.json" > "$out/old.txt" 2>&1
"$java" "${flags[@]}" -jar benchmarks/target/benchmarks.jar VirtualThreadBenchmark \
    -p contender=ferrumDirect,ferrumRouted,nettyAdaptive,nettyPooled,malloc -p size=mixed,4096,524288 -f 2 \
    -rf json -rff "$out/new.json" > "$out/new.txt" 2>&1
