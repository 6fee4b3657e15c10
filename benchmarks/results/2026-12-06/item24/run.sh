#!/usr/bin/env bash
# PERFORMANCE item 24: benchmarks.jar builds of two commits, alternating, three rounds of one fork
# each, in one session: run.sh OUTDIR A.jar B.jar ...
# (jars built by ./ferrum mvn -q -Pbenchmarks -DskipTests install -pl benchmarks at each commit)
out=$1; shift; mkdir -p $out
J=("$(/work/main/ferrum java-home)/bin/java" --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow)
for round in 1 2 3; do
for j in "$@"; do
  n=$(basename $j .jar)
  "${J[@]}" -jar $j "TransferBenchmark.(withMappedEmpty|ferrumWriteNative|ferrumWriteHeap|ferrumReadNative)\$" -p size=4096 -wi 3 -w 1s -i 4 -r 1s -f 1 -rf json -rff $out/t-$n-$round.json > $out/t-$n-$round.txt 2>&1
  "${J[@]}" -jar $j "AllocTouchBenchmark.(ferrumDirect)\$" -p size=4096 -wi 3 -w 1s -i 4 -r 1s -f 1 -rf json -rff $out/a-$n-$round.json > $out/a-$n-$round.txt 2>&1
done; done
for f in $out/*.txt; do grep -H -E 'avgt' $f | sed "s|$out/||"; done
