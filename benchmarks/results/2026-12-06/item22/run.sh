#!/usr/bin/env bash
# PERFORMANCE item 22: the access tracker's lock, before (synchronized) against after (one CAS).
# BASE and NEW are two benchmarks.jar builds; they run alternately, in one session, on one machine.
#   run.sh BASE.jar NEW.jar OUTDIR
set -euo pipefail
base=${1:?}; new=${2:?}; out=${3:?}
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../.." && pwd)"
mkdir -p "$out"
J=("$("$root/ferrum" java-home)/bin/java" --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow)
for jar in base new; do
    j=$base; [[ $jar == new ]] && j=$new
    "${J[@]}" -jar "$j" "TransferBenchmark.(withMappedEmpty|ferrumWriteNative|ferrumReadNative|rawWriteNative|rawReadNative)\$" \
        -p size=4096 -p stats=true,false -wi 2 -w 1s -i 3 -r 1s -f 2 -rf json -rff "$out/transfer-$jar.json" > "$out/transfer-$jar.txt" 2>&1
    "${J[@]}" -jar "$j" "AllocTouchBenchmark.(ferrumDirect|ferrumDirectNoStats)\$" \
        -p size=4096,mixed -wi 3 -w 1s -i 3 -r 1s -f 2 -rf json -rff "$out/touch-$jar.json" > "$out/touch-$jar.txt" 2>&1
done
grep -h -E "^(Transfer|AllocTouch)" "$out"/*-base.txt | sed 's/^/base /'
grep -h -E "^(Transfer|AllocTouch)" "$out"/*-new.txt | sed 's/^/new  /'
