#!/usr/bin/env python3
"""Compare kiln-bench's variants table between two builds of a bench/revisions_ab.sh run.

  variants_ab.py --old LOG... --new LOG... (--changed REGEX | --marked) [--big MK] [--by-m]

Each point (variant, K, M) takes its median time over the rounds given for each build; the ratio
new / old of those medians is summarised per group: the changed points and the rest (the control,
which should stay level), each split at M*K = MK (default 32M, the issue-15 target's shapes), or
with --by-m per M. Changed: the variants whose name matches REGEX (those the change touched), or
with --marked the points the new logs mark '1g' (the pick ran a one-group kernel; the old logs are
then a KILN_Q_ONE_GROUP=0 run of the same build). Then the changed variants' big points one by one and,
for each build, the points below 90% of the copy ceiling at M*K >= MK. Why medians over rounds:
revisions_ab.sh alternates the builds, so a drift of the card's clock falls on both.
"""
import argparse
import re
import statistics
import sys

MS = (1, 16, 128, 2048, 8192, 32768)


def variants_table(path):
    """{(variant, K, M): (us, percent of the copy ceiling, marked 1g)} from one kiln-bench log."""
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
            cells = re.findall(r"([\d.]+) \((\d+(?:\.\d+)?)%\)( 1g)?", row.group(3))
            for m, (us, pct, mark) in zip(MS, cells):
                points[(row.group(1), int(row.group(2)), m)] = (float(us), float(pct), bool(mark))
    if not points:
        sys.exit(f"variants_ab.py: no '== variants' table in {path}")
    return points


def medians(paths):
    tables = [variants_table(p) for p in paths]
    keys = set(tables[0]).intersection(*tables[1:])
    return {k: tuple(statistics.median(t[k][i] for t in tables) for i in (0, 1)) + (any(t[k][2] for t in tables),)
            for k in keys}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", nargs="+", required=True, help="kiln-bench logs of the baseline")
    ap.add_argument("--new", nargs="+", required=True, help="kiln-bench logs of the change")
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument("--changed", help="regular expression naming the touched variants")
    which.add_argument("--marked", action="store_true", help="the points the new logs mark '1g' changed")
    ap.add_argument("--big", type=float, default=32 * 2**20, help="M*K from which a shape is big")
    ap.add_argument("--by-m", action="store_true", help="summarise per M instead of at --big")
    args = ap.parse_args()
    old, new = medians(args.old), medians(args.new)
    changed_name = re.compile(args.changed) if args.changed else None

    def is_changed(key):
        return new[key][2] if args.marked else bool(changed_name.search(key[0]))

    groups = {}
    for key in sorted(set(old) & set(new)):
        shapes = key[2] if args.by_m else key[1] * key[2] >= args.big
        groups.setdefault(("changed" if is_changed(key) else "control", shapes), []).append(new[key][0] / old[key][0])
    if not any(g[0] == "changed" for g in groups):
        sys.exit("variants_ab.py: no point is changed (" + ("no '1g' mark in the new logs" if args.marked else
                                                          f"no variant matches --changed {args.changed!r}") + ")")
    print(f"new / old time, medians over {len(args.old)} and {len(args.new)} rounds")
    print(f"{'group':10} {'shapes':12} {'points':>6} {'median':>8} {'min':>7} {'max':>7}")
    for (name, shapes), ratios in sorted(groups.items()):
        ratios.sort()
        label = f"M={shapes}" if args.by_m else "M*K >= big" if shapes else "M*K < big"
        print(f"{name:10} {label:12} {len(ratios):6} "
              f"{statistics.median(ratios):8.4f} {ratios[0]:7.3f} {ratios[-1]:7.3f}")
    print("\nchanged points at M*K >= big: us old -> new (% of the copy ceiling)")
    for key in sorted(k for k in set(old) & set(new) if is_changed(k) and k[1] * k[2] >= args.big):
        print(f"  {key[0]:56} K={key[1]:<6} M={key[2]:<6} {old[key][0]:8.2f} {new[key][0]:8.2f}"
              f"  {old[key][1]:5.1f}% -> {new[key][1]:5.1f}%")
    for name, points in (("old", old), ("new", new)):
        misses = sorted(k for k, (_, pct, _) in points.items() if k[1] * k[2] >= args.big and pct < 90)
        print(f"{name}: {len(misses)} points below 90% at M*K >= big" + "".join(f"\n  {k}" for k in misses))


if __name__ == "__main__":
    main()
