#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""paired_stats.py A.us B.us [NAME]

Two of exec_bench's raw files (-r: one time a line, line i of both from the same
round): the per-round ratio A/B and difference A-B, each as its median with a
95 % distribution-free interval (order statistics of the binomial(n, 1/2)
around the median). A round pairs runs made moments apart, so a load burst
that slows both cancels out of the ratio, which is what a loaded 2-core VM
needs; the medians of A and B alone do not have that property.

Prints one line:
  paired NAME rounds=N ratio=R [LO, HI] diff_ms=D [LO, HI]
"""
import math
import sys


def read(path):
    with open(path) as f:
        return [float(line) for line in f if line.strip()]


def median_ci(values):
    v = sorted(values)
    n = len(v)
    mid = v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2
    half = 1.96 * math.sqrt(n) / 2
    lo = max(0, int(math.floor(n / 2 - half)))
    hi = min(n - 1, int(math.ceil(n / 2 + half)) - 1)
    return mid, v[lo], v[hi]


def main():
    a, b = read(sys.argv[1]), read(sys.argv[2])
    name = sys.argv[3] if len(sys.argv) > 3 else "A/B"
    n = min(len(a), len(b))
    if n == 0:
        print(f"paired {name} rounds=0")
        return
    ratio = median_ci([a[i] / b[i] for i in range(n) if b[i] > 0])
    diff = median_ci([(a[i] - b[i]) / 1000 for i in range(n)])
    print(f"paired {name} rounds={n} ratio={ratio[0]:.3f} [{ratio[1]:.3f}, {ratio[2]:.3f}] "
          f"diff_ms={diff[0]:.3f} [{diff[1]:.3f}, {diff[2]:.3f}]")


if __name__ == "__main__":
    main()
