#!/usr/bin/env bash
# ab2t.sh OUTDIR ROUNDS SIZES THREADS REGEX A.jar B.jar ...: alternating single forks
out=$1; rounds=$2; size=$3; t=$4; rx=$5; shift 5; mkdir -p $out
J=("$(/work/main/ferrum java-home)/bin/java" --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow)
for round in $(seq 1 $rounds); do
for j in "$@"; do
  n=$(basename $j .jar)
  "${J[@]}" -jar $j "$rx" -p size=$size -wi 4 -w 1s -i 4 -r 1s -f 1 -t $t -rf json -rff $out/$n-$round.json > $out/$n-$round.txt 2>&1
done; done
python3 - "$out" <<'PY'
import json,glob,sys,collections,statistics
d=collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1]+'/*.json')):
    n=f.split('/')[-1].rsplit('-',1)[0]
    for r in json.load(open(f)):
        k=(r['benchmark'].split('.')[-2]+'.'+r['benchmark'].split('.')[-1], r['params']['size'])
        d[(k,n)].append(r['primaryMetric']['score'])
for (k,n),v in sorted(d.items()):
    se=statistics.stdev(v)/len(v)**0.5 if len(v)>1 else 0
    print(f"{k[0]:40s} {k[1]:>7s} {n:8s} mean {statistics.mean(v):6.1f} se {se:4.1f}  forks {' '.join(f'{x:.1f}' for x in v)}")
PY
