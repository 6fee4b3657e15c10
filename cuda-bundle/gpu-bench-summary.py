#!/usr/bin/env python3
"""Issue 16's GPU targets from GpuBenchmark's JMH JSON files: met or missed, with the figures."""
import json
import sys

# One or more JMH JSON files (gpu-check.sh runs the benchmark in parts).
rows = [r for f in sys.argv[1:] for r in json.load(open(f))]
score = {}
for r in rows:
    name = r["benchmark"].rsplit(".", 1)[1]
    p = r.get("params", {})
    score[(name, p.get("size"), p.get("host"))] = r["primaryMetric"]["score"]


def mark(ok):
    return "met" if ok else "MISSED"


print("## Targets")
print("allocation (target: pool >= 100x faster than cuMemAlloc+cuMemFree up to 2 MiB)")
for size in ["256", "65536", "2097152", "67108864"]:
    f, c = score.get(("ferrumAllocFree", size, None)), score.get(("cuMemAllocFree", size, None))
    if f and c:
        target = mark(c / f >= 100) if int(size) <= 2 << 20 else "(no target)"
        print(f"  {size:>10} B: ferrum {f:10.1f} ns, cuMemAlloc+Free {c:12.1f} ns, {c / f:8.1f}x {target}")
print("copies (GB/s; target: pinned >= 0.95x raw; heap->device at 64 MiB >= 0.8x ferrum pinned)")
for direction, fn, rn in [("H2D", "ferrumHostToDevice", "rawHostToDevice"), ("D2H", "ferrumDeviceToHost", "rawDeviceToHost")]:
    for host in ["pinned", "pageable", "heap"]:
        for size in ["65536", "1048576", "67108864", "1073741824"]:
            f, r = score.get((fn, size, host)), score.get((rn, size, host))
            if f and r:
                gbf, gbr = int(size) / f, int(size) / r
                target = mark(gbf / gbr >= 0.95) if host == "pinned" else ""
                print(f"  {direction} {host:>8} {int(size) >> 10:>8} KiB: ferrum {gbf:7.2f}, raw {gbr:7.2f}, {gbf / gbr:5.2f}x {target}")
heap, pinned = score.get(("ferrumHostToDevice", "67108864", "heap")), score.get(("ferrumHostToDevice", "67108864", "pinned"))
if heap and pinned:
    print(f"  heap->device 64 MiB: {pinned / heap:.2f}x the pinned figure {mark(pinned / heap >= 0.8)}")
