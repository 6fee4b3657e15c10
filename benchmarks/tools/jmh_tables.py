#!/usr/bin/env python3
"""Renders JMH JSON results (-rf json) as the Markdown tables of docs/PERFORMANCE.md.

Usage: jmh_tables.py allocfree-1t.json allocfree-2t.json   (churn: ns/op +- error, heap B/op)
       jmh_tables.py copy.json                              (copies: ns/op +- error, GB/s)
       jmh_tables.py --forks headline-mixed-2t.json         (each fork's mean and range, to see bimodal runs)
"""
import json
import sys


def fmt(x):
    return f"{x:,.0f}" if x >= 100 else f"{x:,.1f}"


def rows(path):
    for r in json.load(open(path)):
        name = r["benchmark"].rsplit(".", 1)[1]
        params = r.get("params", {})
        m = r["primaryMetric"]
        alloc = r.get("secondaryMetrics", {}).get("gc.alloc.rate.norm")
        yield name, params.get("size"), r["threads"], m["score"], m["scoreError"], alloc["score"] if alloc else None


def churn(paths):
    data = {}
    sizes, threads, names = [], [], []
    for p in paths:
        for name, size, t, score, err, alloc in rows(p):
            data[(name, size, t)] = (score, err, alloc)
            for v, lst in ((size, sizes), (t, threads), (name, names)):
                if v not in lst:
                    lst.append(v)
    for t in threads:
        cols = [(s, t) for s in sizes]
        print(f"**{t} thread{'s' if t > 1 else ''}**, ns per allocate + free (per thread), ± 99.9 % interval:")
        print()
        table(names, cols, data, lambda v: f"{fmt(v[0])} ± {fmt(v[1])}")
        print()
    print("Heap bytes allocated per allocate + free (`-prof gc`, gc.alloc.rate.norm):")
    print()
    table(names, [(s, t) for t in threads for s in sizes], data,
          lambda v: "—" if v[2] is None else f"{v[2]:.0f}", header=lambda s, t: f"{s}, {t} thr")


def table(names, cols, data, cell, header=lambda s, t: s):
    print("| contender | " + " | ".join(header(s, t) for s, t in cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for n in names:
        cells = []
        for s, t in cols:
            v = data.get((n, s, t))
            cells.append("—" if v is None else cell(v))
        print(f"| {n} | " + " | ".join(cells) + " |")


def copies(path):
    data = {}
    sizes, names = [], []
    for name, size, t, score, err, _ in rows(path):
        data[(name, size)] = (score, err)
        if size not in sizes:
            sizes.append(size)
        if name not in names:
            names.append(name)
    print("| contender | " + " | ".join(sizes) + " |")
    print("|---" * (len(sizes) + 1) + "|")
    for n in names:
        cells = []
        for s in sizes:
            v = data.get((n, s))
            if v is None:
                cells.append("—")
            else:
                gbs = int(s) / v[0]
                cells.append(f"{fmt(v[0])} ± {fmt(v[1])} ({gbs:.1f} GB/s)")
        print(f"| {n} | " + " | ".join(cells) + " |")


def forks(path):
    rs = json.load(open(path))
    n = max(len(r["primaryMetric"]["rawData"]) for r in rs)
    print("| contender | " + " | ".join(f"fork {i + 1}: mean (min-max)" for i in range(n)) + " |")
    print("|---" * (n + 1) + "|")
    for r in rs:
        name = r["benchmark"].rsplit(".", 1)[1]
        size = r.get("params", {}).get("size")
        cells = [f"{fmt(sum(f) / len(f))} ({fmt(min(f))}-{fmt(max(f))})" for f in r["primaryMetric"]["rawData"]]
        print(f"| {name}{'' if size is None else ', ' + size} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    if sys.argv[1] == "--forks":
        forks(sys.argv[2])
    elif any("copy" in p for p in sys.argv[1:]):
        copies(sys.argv[1])
    else:
        churn(sys.argv[1:])
