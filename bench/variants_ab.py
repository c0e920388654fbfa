#!/usr/bin/env python3
"""Compare kiln bench's variants table between two builds of a bench/revisions_ab.sh run.

  variants_ab.py --old LOG... --new LOG... --changed REGEX [--big MK]

Each point (variant, K, M) takes its median time over the rounds given for each build; the ratio
new / old of those medians is summarised per group: the variants whose name matches REGEX (those
the change touched) and the rest (the control, which should stay level), each split at M*K = MK
(default 32M, the issue-15 target's shapes). Then the changed variants' big points one by one and,
for each build, the points below 90% of the copy ceiling at M*K >= MK. Why medians over rounds:
revisions_ab.sh alternates the builds, so a drift of the card's clock falls on both.
"""
import argparse
import re
import statistics
import sys

MS = (1, 16, 128, 2048, 8192, 32768)


def variants_table(path):
    """{(variant, K, M): (us, percent of the copy ceiling)} from one kiln bench log."""
    points, inside = {}, False
    with open(path) as log:
        for line in log:
            if line.startswith("== variants"):
                inside = True
                continue
            if inside and line.startswith("=="):
                break
            row = re.match(r"(\S.*?)\s{2,}(\d+)\s+(.*)$", line.rstrip()) if inside else None
            if not row or row.group(1) == "variant" or row.group(1).startswith("copy"):
                continue
            cells = re.findall(r"([\d.]+) \((\d+(?:\.\d+)?)%\)", row.group(3))
            for m, (us, pct) in zip(MS, cells):
                points[(row.group(1), int(row.group(2)), m)] = (float(us), float(pct))
    if not points:
        sys.exit(f"variants_ab.py: no '== variants' table in {path}")
    return points


def medians(paths):
    tables = [variants_table(p) for p in paths]
    keys = set(tables[0]).intersection(*tables[1:])
    return {k: tuple(statistics.median(t[k][i] for t in tables) for i in (0, 1)) for k in keys}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", nargs="+", required=True, help="kiln bench logs of the baseline")
    ap.add_argument("--new", nargs="+", required=True, help="kiln bench logs of the change")
    ap.add_argument("--changed", required=True, help="regular expression naming the touched variants")
    ap.add_argument("--big", type=float, default=32 * 2**20, help="M*K from which a shape is big")
    args = ap.parse_args()
    old, new = medians(args.old), medians(args.new)
    changed = re.compile(args.changed)
    groups = {}
    for key in sorted(set(old) & set(new)):
        group = ("changed" if changed.search(key[0]) else "control", key[1] * key[2] >= args.big)
        groups.setdefault(group, []).append(new[key][0] / old[key][0])
    if not any(g[0] == "changed" for g in groups):
        sys.exit(f"variants_ab.py: no variant matches --changed {args.changed!r}")
    print(f"new / old time, medians over {len(args.old)} and {len(args.new)} rounds")
    print(f"{'group':10} {'shapes':12} {'points':>6} {'median':>8} {'min':>7} {'max':>7}")
    for (name, big), ratios in sorted(groups.items()):
        ratios.sort()
        print(f"{name:10} {'M*K >= big' if big else 'M*K < big':12} {len(ratios):6} "
              f"{statistics.median(ratios):8.4f} {ratios[0]:7.3f} {ratios[-1]:7.3f}")
    print("\nchanged variants at M*K >= big: us old -> new (% of the copy ceiling)")
    for key in sorted(k for k in old if changed.search(k[0]) and k[1] * k[2] >= args.big and k in new):
        print(f"  {key[0]:56} K={key[1]:<6} M={key[2]:<6} {old[key][0]:8.2f} {new[key][0]:8.2f}"
              f"  {old[key][1]:5.1f}% -> {new[key][1]:5.1f}%")
    for name, points in (("old", old), ("new", new)):
        misses = sorted(k for k, (_, pct) in points.items() if k[1] * k[2] >= args.big and pct < 90)
        print(f"{name}: {len(misses)} points below 90% at M*K >= big" + "".join(f"\n  {k}" for k in misses))


if __name__ == "__main__":
    main()
