#!/usr/bin/env bash
# before.jar: benchmarks/target/benchmarks.jar built at 32a6738 (before issue 14); after.jar: built at
# 9e49143 (r1, the splits merged) and at 6217d47 (r2, plus the one-write registry). Built with
# ./ferrum mvn -q -o -Pbenchmarks -DskipTests package and copied to /tmp/abx/.
# Alternating single-fork A/B: before.jar and after.jar take turns, N rounds.
# usage: run.sh OUTDIR ROUNDS
set -euo pipefail
out=$1; rounds=${2:-3}
J=/usr/lib/jvm/temurin-25-jdk-amd64/bin/java
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  for side in before after; do
    jar=/tmp/abx/$side.jar
    $J --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow -jar $jar \
      'AllocFreeBenchmark.(ferrumDirect|ferrumRouter)$' -p size=4096,mixed -wi 5 -w 1s -i 6 -r 1s -f 1 -t 1 \
      -rf json -rff "$out/allocfree-$side-$r.json" > "$out/allocfree-$side-$r.txt" 2>&1
    $J --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow -jar $jar \
      RouterPartsBenchmark -wi 3 -w 1s -i 5 -r 1s -f 1 \
      -rf json -rff "$out/router-$side-$r.json" > "$out/router-$side-$r.txt" 2>&1
    echo "round $r $side done $(date +%T)"
  done
done
