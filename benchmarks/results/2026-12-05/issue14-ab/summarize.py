import json, glob, os, sys, statistics as st, collections
d = sys.argv[1]
rows = collections.defaultdict(lambda: collections.defaultdict(list))
for f in sorted(glob.glob(os.path.join(d, '*.json'))):
    side = 'before' if '-before-' in f else 'after'
    for b in json.load(open(f)):
        name = b['benchmark'].rsplit('.', 2)
        key = name[-2] + '.' + name[-1] + ('' if not b.get('params') else ' ' + ','.join(f'{k}={v}' for k, v in b['params'].items()))
        rows[key][side].append(b['primaryMetric']['score'])
print('| benchmark | before ns/op: mean of forks (min-max) | after ns/op | after / before |')
print('|---|---|---|---|')
for k in sorted(rows):
    b, a = rows[k]['before'], rows[k]['after']
    if not b or not a: continue
    print(f'| {k} | {st.mean(b):.1f} ({min(b):.1f}-{max(b):.1f}) | {st.mean(a):.1f} ({min(a):.1f}-{max(a):.1f}) | {st.mean(a)/st.mean(b):.3f} |')
