#!/usr/bin/env bash
# PERFORMANCE item 25: two benchmarks.jar builds alternate, three rounds of one fork each:
#   run.sh OUTDIR base.jar head.jar
out=$1; shift; mkdir -p $out
J=("$("$(dirname "$0")/../../../../ferrum" java-home)/bin/java" --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow)
for round in 1 2 3; do
for j in "$@"; do
  n=$(basename $j .jar)
  "${J[@]}" -jar $j "TransferBenchmark.(ferrum|raw)(Write|Read)(Native|Heap)\$" -p size=4096 -wi 3 -w 1s -i 3 -r 1s -f 1 -rf json -rff $out/t-$n-$round.json > $out/t-$n-$round.txt 2>&1
done; done
