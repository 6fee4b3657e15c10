"""Issue 15's ratio table from the JSON files run.sh wrote: each target, the two sides, the ratio,
met or missed. Ratios are Ferrum / contender in ns per operation (lower is better for Ferrum),
except the throughput targets (1 MiB and 256 MiB), which are given as contender time / Ferrum time
(higher is better, as the issue states them). Each side is the mean over forks; the range in
parentheses is the lowest and highest fork mean.

usage: python3 summarize.py OUTDIR [--all]   (--all also lists every row measured)
"""
import collections
import glob
import json
import os
import statistics
import sys

d = sys.argv[1]
rows = {}  # (class.method, params tuple, threads) -> (fork means, unit)
for f in sorted(glob.glob(os.path.join(d, '*.json'))):
    try:
        data = json.load(open(f))
    except ValueError:
        print(f'(skipped {f}: not complete JSON)', file=sys.stderr)
        continue
    for b in data:
        name = '.'.join(b['benchmark'].rsplit('.', 2)[-2:])
        params = tuple(sorted((b.get('params') or {}).items()))
        forks = [statistics.mean(it) for it in b['primaryMetric']['rawData']]
        rows[(name, params, b['threads'])] = (forks, b['primaryMetric']['scoreUnit'])


def get(name, threads=1, **params):
    """The row of that benchmark and thread count whose parameters agree with {@code params}
    (a parameter the row does not have counts as agreeing: files from before it existed)."""
    want = tuple(sorted((k, str(v)) for k, v in params.items()))
    for (n, p, t), v in rows.items():
        have = dict(p)
        if n == name and t == threads and all(have.get(k, x) == x for k, x in want):
            return v
    return None


def show(v):
    if v is None:
        return 'not measured'
    forks, unit = v
    m = statistics.mean(forks)
    rng = f' ({min(forks):,.1f}-{max(forks):,.1f})' if len(forks) > 1 else ''
    return f'{m:,.1f}{rng} {unit}'


def mean(v):
    return statistics.mean(v[0])


out = []


def target(label, ours, theirs, limit, higher_is_better=False):
    """ours / theirs <= limit (times), or theirs / ours >= limit when higher_is_better."""
    if ours is None or theirs is None:
        out.append((label, show(ours), show(theirs), '-', 'not measured'))
        return
    if higher_is_better:
        r = mean(theirs) / mean(ours)
        ok = r >= limit
    else:
        r = mean(ours) / mean(theirs)
        ok = r <= limit
    out.append((label, show(ours), show(theirs), f'{r:.2f}x', 'met' if ok else '**missed**'))


def faster(*vs):
    vs = [v for v in vs if v is not None]
    return min(vs, key=mean) if vs else None


T = 'AllocTouchBenchmark.'
for s in ['64', '4096', '65536', 'mixed']:
    target(f'alloc+touch+free {s}, 1 thread: Ferrum <= 1.0x Netty adaptive',
           get(T + 'ferrumDirect', 1, size=s), get(T + 'nettyAdaptive', 1, size=s), 1.0)
target('alloc+touch+free mixed, 2 threads: Ferrum <= 0.8x Netty adaptive',
       get(T + 'ferrumDirect', 2, size='mixed'), get(T + 'nettyAdaptive', 2, size='mixed'), 0.8)
target('alloc+touch+free mixed, 2 threads: Ferrum <= 0.6x Netty pooled',
       get(T + 'ferrumDirect', 2, size='mixed'), get(T + 'nettyPooled', 2, size='mixed'), 0.6)
X = 'TransferBenchmark.'
for op, raw in [('WriteHeap', 'WriteHeap'), ('WriteNative', 'WriteNative'), ('ReadHeap', 'ReadHeap'),
                ('ReadNative', 'ReadNative')]:
    target(f'{op[0].lower() + op[1:]} 4 KiB: Ferrum <= 1.3x raw MemorySegment.copy',
           get(X + 'ferrum' + op, size=4096), get(X + 'raw' + raw, size=4096), 1.3)
for size, label in [(1048576, '1 MiB'), (268435456, '256 MiB')]:
    for op in ['WriteHeap', 'WriteNative', 'ReadHeap', 'ReadNative']:
        target(f'{op[0].lower() + op[1:]} {label}: Ferrum >= 0.95x raw (throughput)',
               get(X + 'ferrum' + op, size=size), get(X + 'raw' + op, size=size), 0.95, True)
    for src in ['Heap', 'Native']:
        peer = faster(get(X + 'nettySetBytes' + src, size=size), get(X + 'arrowSetBytes' + src, size=size))
        target(f'write{src} {label}: Ferrum >= 1.0x the faster of Netty/Arrow setBytes (throughput)',
               get(X + 'ferrumWrite' + src, size=size), peer, 1.0, True)
target('handle-to-handle copy 4 KiB: Ferrum <= 1.5x raw',
       get(X + 'ferrumCopyHandles', size=4096), get(X + 'rawCopyViews', size=4096), 1.5)
V = 'VirtualThreadBenchmark.mixed'
target('64 virtual threads, mixed: Ferrum <= 1.0x Netty adaptive',
       get(V, contender='ferrumDirect', **{'yield': 'false'}), get(V, contender='nettyAdaptive', **{'yield': 'false'}), 1.0)
C = 'CrossThreadFreeBenchmark.pipeline'
for s in ['4096', '65536']:
    target(f'cross-thread free {s}: Ferrum <= 1.0x Netty adaptive',
           get(C, contender='ferrumDirect', size=s, touch='true', freeBy='freer'),
           get(C, contender='nettyAdaptive', size=s, touch='true', freeBy='freer'), 1.0)
wm = get(X + 'withMappedEmpty', size=4096)
if wm is None:
    out.append(('withMapped, empty action, 4 KiB block: <= 60 ns', 'not measured', '60 ns', '-', 'not measured'))
else:
    out.append(('withMapped, empty action, 4 KiB block: <= 60 ns', show(wm),
                f'60 ns (confined arena open+close: {show(get(X + "arenaConfinedEmpty", size=4096))})',
                f'{mean(wm):.1f} ns', 'met' if mean(wm) <= 60 else '**missed**'))

print('| target | Ferrum | against | ratio | verdict |')
print('|---|---|---|---|---|')
for r in out:
    print('| ' + ' | '.join(r) + ' |')
print()
print(f'{sum(1 for r in out if r[4] == "met")} met, {sum(1 for r in out if "missed" in r[4])} missed, '
      f'{sum(1 for r in out if r[4] == "not measured")} not measured.')

if '--all' in sys.argv:
    print()
    print('| benchmark | params | threads | mean of forks (lowest-highest) |')
    print('|---|---|---|---|')
    for (n, p, t), v in sorted(rows.items()):
        print(f'| {n} | {",".join(f"{k}={x}" for k, x in p)} | {t} | {show(v)} |')
