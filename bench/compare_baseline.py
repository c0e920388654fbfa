#!/usr/bin/env python3
"""A kiln-bench run against the committed baseline of its GPU kind (bench/baselines/).

  compare_baseline.py --make-baseline RUN.json --out STEM [--note TEXT]
      writes STEM.json (the run's medians, no raw samples; well under 200 KB) and STEM.md (the
      same as tables for people).
  compare_baseline.py --compare RUN.json [BASELINE.json] [--threshold T] [--show N] [--fail-over F]
      prints run / baseline for every table both hold: the targets side by side, the copy
      ceiling, the arms, the floor, the decode rows, the host rows, and the variants table
      summarised per M with the points that moved most. Without BASELINE.json, the baseline of
      the run's GPU kind (bench/baselines/h100.json, h200.json). Exit 0; with --fail-over F, 1
      when a group's median ratio (arms, decode, variants per M) is above F; 2 on bad input.

RUN.json is what `kiln-bench --json FILE` writes, or the merged JSON of bench/run_device.sh (its
`kiln` part is read); either side may also be a baseline JSON. Ratios are times, run over
baseline: above 1 is slower. Runs at different times differ by a few percent on the same kind of
card (docs/performance.md, "Comparing runs"), so a ratio near 1 says nothing; a kernel change is
measured with bench/revisions_ab.sh instead.
"""
import argparse
import json
import math
import pathlib
import re
import statistics
import sys

import merge_results  # bench/, beside this script

FORMAT = "kiln-bench-baseline/1"
DECODE_COLUMNS = ("queued", "pdl_queued", "graph", "pdl_graph", "batch", "pdl_batch")
BIG_MK = 32 * 2**20  # the variants target's shapes: M*K >= 32M (kiln-bench's "M*K >= 32e6")
BASELINES = pathlib.Path(__file__).resolve().parent / "baselines"


def fail(message):
    print(f"compare_baseline.py: {message}", file=sys.stderr)
    sys.exit(2)


def sig(value, digits=4):
    """A float cut to `digits` significant digits (the baseline keeps medians, not noise)."""
    return None if value is None else float(f"{value:.{digits}g}")


def gpu_kind(name):
    """'h100', 'h200', ... from the device name; '' when no kind is recognised."""
    found = re.search(r"\b([A-Z]{1,2}\d{2,4})\b", name or "")
    return found.group(1).lower() if found else ""


def read_json(path):
    try:
        return json.loads(pathlib.Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        fail(f"cannot read {path}: {e}")


def rows_of(tables, name):
    return tables.get(name, {}).get("rows", [])


def summarise_run(run, note=""):
    """The baseline of one kiln-bench report (its JSON, or run_device.sh's merged JSON)."""
    kiln = run.get("kiln", run)
    if "tables" not in kiln:
        fail("not a kiln-bench JSON report (no 'tables')")
    env, tables = kiln.get("environment", {}), kiln["tables"]
    variants_title = tables.get("variants", {}).get("title", "")
    out = {
        "format": FORMAT,
        "note": note,
        "environment": {key: env.get(key) for key in ("gpu", "sm_count", "compute_capability", "target", "driver_api",
                                                     "nvrtc", "kiln", "date", "quick", "cpus")},
        # Why from the title: kiln-bench records KILN_PDL only there ("variants launched with PDL").
        "variants_pdl": "launched with PDL" in variants_title,
        "targets": [{k: t.get(k) for k in ("target", "measured", "limit", "met")} for t in kiln.get("targets", [])],
    }
    ceiling = rows_of(tables, "ceiling")
    if ceiling:
        out["ceiling_gbps"] = sig(ceiling[0]["gbps"])
    arms = [{"m": r["m"], "k": r["k"], "shared_us": sig(r.get("shared_us")), "twin_us": sig(r.get("twin_us")),
             "twin_pdl_us": sig(r.get("twin_pdl_us")), "copy_us": sig(r.get("copy_us")),
             "twin_of_ceiling": sig(r.get("twin_of_ceiling")), "pick": r.get("pick")}
            for r in rows_of(tables, "arms")]
    if arms:
        out["arms"] = arms
    floor = [{"m": r["m"], "k": r["k"], "twin_ctas": r.get("twin_ctas"), "shared_us": sig(r.get("shared_us")),
              "twin_us": sig(r.get("twin_us")), "pick": r.get("pick"), "agree": r.get("agree")}
             for r in rows_of(tables, "floor")]
    if floor:
        out["floor"] = floor
    decode = []
    for r in rows_of(tables, "decode"):
        # One shape per row: the empty kernel's own columns, else the picked arm's.
        if r.get("kernel") == "empty":
            row = {"row": "empty", **{c: r.get(f"{c}_us") for c in DECODE_COLUMNS}}
        else:
            arm = r.get("pick", "shared")
            row = {"row": f"{r.get('m')}x{r.get('k')}", "pick": arm, "queued": r.get("pick_queued_us"),
                   "pdl_queued": r.get("pick_pdl_queued_us"), "graph": r.get(f"{arm}_graph_us"),
                   "pdl_graph": r.get("pick_pdl_graph_us"), "batch": r.get(f"{arm}_batch_us"),
                   "pdl_batch": r.get("pick_pdl_batch_us")}
        decode.append({k: (sig(v) if isinstance(v, float) else v) for k, v in row.items() if v is not None})
    if decode:
        out["decode"] = decode
    for name in ("host", "launch"):
        values = {r["name"]: sig(r["value"]) for r in rows_of(tables, name) if "name" in r}
        if values:
            out[name] = values
    jit = [{k: (sig(v) if isinstance(v, float) else v) for k, v in r.items()} for r in rows_of(tables, "jit")]
    if jit:
        out["jit"] = jit
    disk = [{k: (sig(v) if isinstance(v, float) else v) for k, v in r.items()} for r in rows_of(tables, "disk_cache")]
    if disk:
        out["disk_cache"] = disk
    variant_rows = rows_of(tables, "variants")
    if variant_rows:
        ms = [p["m"] for p in variant_rows[0]["points"]]
        us, one_group, of_ceiling = {}, {}, {}
        for r in variant_rows:
            key = f"{r['variant']}@{r['k']}"
            us[key] = [sig(p["us"]) for p in r["points"]]
            of_ceiling[key] = [sig(p.get("of_ceiling")) for p in r["points"]]
            marks = [int(bool(p.get("one_group"))) for p in r["points"]]
            if any(marks):
                one_group[key] = marks
        out["variants"] = {"ms": ms, "us": us, "of_ceiling": of_ceiling, "one_group": one_group}
    return out


def load_side(path):
    data = read_json(path)
    return data if data.get("format") == FORMAT else summarise_run(data)


# ---- the baseline's markdown ---------------------------------------------------------------------

def md_table(columns, rows):
    """merge_results.py's table as a list of lines, a missing value shown as '-'."""
    return merge_results.md_table(columns, [["-" if v is None else v for v in row] for row in rows]).split("\n")


def variant_points(base):
    """{(variant, K, M): (us, fraction of the ceiling)}, the copy rows left out."""
    v, points = base.get("variants"), {}
    if not v:
        return points
    for key, times in v["us"].items():
        name, k = key.rsplit("@", 1)
        if name == "copy":
            continue
        for i, m in enumerate(v["ms"]):
            points[(name, int(k), m)] = (times[i], v["of_ceiling"][key][i] or 0.0)
    return points


def write_markdown(base, path):
    env = base["environment"]
    out = [f"# kiln-bench baseline: {env.get('gpu')}", "",
           "Made by `bench/compare_baseline.py --make-baseline` from one `kiln-bench` run; the JSON beside this "
           "file holds the same figures for `--compare`. What they mean: [docs/performance.md](../../docs/performance.md).",
           ""]
    if base.get("note"):
        out += [base["note"], ""]
    out += md_table(["", ""], [
        ["GPU", f"{env.get('gpu')} ({env.get('sm_count')} SMs, compute capability {env.get('compute_capability')}, "
                f"target {env.get('target')})"],
        ["driver API / NVRTC", f"{env.get('driver_api')} / {env.get('nvrtc')}"],
        ["kiln", env.get("kiln")], ["run date (UTC)", env.get("date")], ["quick run", "yes" if env.get("quick") else "no"],
        ["variants launched with PDL", "yes" if base.get("variants_pdl") else "no"],
        ["copy ceiling", f"{base.get('ceiling_gbps')} GB/s" if base.get("ceiling_gbps") else None]]) + [""]
    if base["targets"]:
        out += ["## Targets", ""] + md_table(["target", "measured", "limit", "met"], [
            [t["target"], t["measured"], t["limit"], "-" if t["met"] is None else ("yes" if t["met"] else "no")]
            for t in base["targets"]]) + [""]
    if base.get("arms"):
        out += ["## Arms (us per launch)", ""] + md_table(
            ["M", "K", "shared", "twin", "twin PDL", "copy", "twin % of ceiling", "pick"],
            [[r["m"], r["k"], r["shared_us"], r["twin_us"], r["twin_pdl_us"], r["copy_us"],
              f"{100 * r['twin_of_ceiling']:.1f}%" if r.get("twin_of_ceiling") else None,
              r["pick"]] for r in base["arms"]]) + [""]
    if base.get("floor"):
        out += ["## Floor", ""] + md_table(["M", "K", "twin CTAs", "shared us", "twin us", "pick", "agree"],
                                          [[r["m"], r["k"], r["twin_ctas"], r["shared_us"], r["twin_us"], r["pick"],
                                            "yes" if r["agree"] else "no"] for r in base["floor"]]) + [""]
    if base.get("decode"):
        present = [c for c in DECODE_COLUMNS if any(c in r for r in base["decode"])]
        out += ["## Decode (us per launch: the empty kernel, then the picked arm)", ""] + md_table(
            ["M x K", "pick"] + [c.replace("_", " ") for c in present],
            [[r["row"], r.get("pick", "-")] + [r.get(c) for c in present] for r in base["decode"]]) + [""]
    for name in ("host", "launch"):
        if base.get(name):
            out += [f"## {name.capitalize()}", ""] + md_table(["measurement", "value"],
                                                            [[k, v] for k, v in base[name].items()]) + [""]
    points = variant_points(base)
    if points:
        big = {k: v for k, v in points.items() if k[1] * k[2] >= BIG_MK}
        reached = sum(1 for _, f in big.values() if f >= 0.9)
        out += ["## Variants", "",
                f"{len(points)} points ({len({k[0] for k in points})} variants); at M*K >= 32M {reached} of {len(big)} "
                "reach 90% of the copy ceiling. Per M, the fraction of the ceiling over the variants and K:", ""]
        rows = []
        for m in base["variants"]["ms"]:
            fr = sorted(f for (_, _, pm), (_, f) in points.items() if pm == m)
            rows.append([m, f"{100 * fr[0]:.1f}%", f"{100 * statistics.median(fr):.1f}%", f"{100 * fr[-1]:.1f}%"])
        out += md_table(["M", "min", "median", "max"], rows) + ["", "The ten slowest points at M*K >= 32M:", ""]
        worst = sorted(big.items(), key=lambda kv: kv[1][1])[:10]
        out += md_table(["variant", "K", "M", "us", "% of ceiling"],
                        [[k[0], k[1], k[2], v[0], f"{100 * v[1]:.1f}%"] for k, v in worst]) + [""]
    path.write_text("\n".join(out))


# ---- the comparison ------------------------------------------------------------------------------

def ratio_summary(ratios):
    ratios = sorted(ratios)
    return statistics.median(ratios), ratios[0], ratios[-1]


def print_table(columns, rows):
    cells = [[str(c) for c in columns]] + [["-" if v is None else str(v) for v in row] for row in rows]
    width = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    for row in cells:
        print("  ".join(c.ljust(width[i]) if i == 0 else c.rjust(width[i]) for i, c in enumerate(row)).rstrip())


def fmt(value):
    return "-" if value is None else f"{value:.3f}"


def compare(run, base, threshold, show):
    """Prints the comparison; returns {group: median ratio} for --fail-over."""
    medians = {}
    renv, benv = run["environment"], base["environment"]
    print(f"run:      {renv.get('gpu')}, {renv.get('date')}, variants with PDL: {'yes' if run.get('variants_pdl') else 'no'}")
    print(f"baseline: {benv.get('gpu')}, {benv.get('date')}, variants with PDL: {'yes' if base.get('variants_pdl') else 'no'}")
    if base.get("note"):
        print(f"baseline note: {base['note']}")
    if gpu_kind(renv.get("gpu")) != gpu_kind(benv.get("gpu")):
        print("warning: the run and the baseline are from different GPU kinds")
    if bool(run.get("variants_pdl")) != bool(base.get("variants_pdl")):
        print("warning: one side launched the variants with PDL (KILN_PDL=1) and the other did not")
    if bool(renv.get("quick")) != bool(benv.get("quick")):
        print("warning: one side is a --quick run")
    print("ratios are times, run / baseline (above 1: slower)")

    base_targets = {t["target"]: t for t in base["targets"]}
    shared = [(t, base_targets[t["target"]]) for t in run["targets"] if t["target"] in base_targets]
    if shared:
        print("\n== targets: baseline -> run (met)")
        met = lambda x: "-" if x is None else ("yes" if x else "no")
        for t, b in shared:
            print(f"{t['target']}\n    {b['measured']} -> {t['measured']}  ({met(b['met'])} -> {met(t['met'])})")

    if run.get("ceiling_gbps") and base.get("ceiling_gbps"):
        print(f"\n== ceiling: {base['ceiling_gbps']:.0f} -> {run['ceiling_gbps']:.0f} GB/s "
              f"({run['ceiling_gbps'] / base['ceiling_gbps']:.3f}x bandwidth)")

    if run.get("arms") and base.get("arms"):
        bshape = {(r["m"], r["k"]): r for r in base["arms"]}
        rows, twin = [], []
        for r in run["arms"]:
            b = bshape.get((r["m"], r["k"]))
            if not b:
                continue
            cells = [r["m"], r["k"]]
            for col in ("shared_us", "twin_us", "twin_pdl_us", "copy_us"):
                ratio = r[col] / b[col] if r.get(col) and b.get(col) else None
                cells.append(fmt(ratio))
                if col == "twin_us" and ratio:
                    twin.append(ratio)
            cells.append(f"{b['pick']} -> {r['pick']}" if b["pick"] != r["pick"] else r["pick"])
            rows.append(cells)
        print("\n== arms: run / baseline time per shape")
        print_table(["M", "K", "shared", "twin", "twin PDL", "copy", "pick"], rows)
        if twin:
            medians["arms twin"] = ratio_summary(twin)[0]
            print("twin: median %.3f, min %.3f, max %.3f" % ratio_summary(twin))

    if run.get("floor") and base.get("floor"):
        agree = lambda side: sum(1 for r in side["floor"] if r["agree"])
        print(f"\n== floor: the pick agrees with the faster arm at {agree(base)} of {len(base['floor'])} points in the "
              f"baseline, {agree(run)} of {len(run['floor'])} in the run")

    if run.get("decode") and base.get("decode"):
        brow = {r["row"]: r for r in base["decode"]}
        cols = [c for c in DECODE_COLUMNS if any(c in r for r in run["decode"])]
        rows, queued = [], []
        for r in run["decode"]:
            b = brow.get(r["row"])
            if not b:
                continue
            cells = [r["row"]]
            for c in cols:
                ratio = r[c] / b[c] if r.get(c) and b.get(c) else None
                cells.append(fmt(ratio))
                if c in ("queued", "pdl_queued") and ratio and r["row"] != "empty":
                    queued.append(ratio)
            rows.append(cells)
        print("\n== decode: run / baseline time per launch (batch rows follow the host's speed more than the GPU's)")
        print_table(["M x K"] + [c.replace("_", " ") for c in cols], rows)
        if queued:
            medians["decode queued"] = ratio_summary(queued)[0]

    for name in ("host", "launch"):
        if run.get(name) and base.get(name):
            rows = [[k, base[name][k], v, fmt(v / base[name][k]) if base[name][k] else "-"]
                    for k, v in run[name].items() if k in base[name]]
            if rows:
                print(f"\n== {name}")
                print_table(["measurement", "baseline", "run", "ratio"], rows)

    rp, bp = variant_points(run), variant_points(base)
    common = sorted(set(rp) & set(bp))
    if common:
        print(f"\n== variants: run / baseline time, {len(common)} points in both")
        by_m, rows = {}, []
        for key in common:
            by_m.setdefault(key[2], []).append(rp[key][0] / bp[key][0])
        for m, ratios in sorted(by_m.items()):
            med, lo, hi = ratio_summary(ratios)
            medians[f"variants M={m}"] = med
            slower = sum(1 for x in ratios if x > 1 + threshold)
            faster = sum(1 for x in ratios if x < 1 - threshold)
            rows.append([f"M={m}", len(ratios), f"{med:.3f}", f"{lo:.3f}", f"{hi:.3f}", slower, faster])
        print_table(["shapes", "points", "median", "min", "max", f"> {1 + threshold:g}", f"< {1 - threshold:g}"], rows)
        for label, side in (("baseline", bp), ("run", rp)):
            big = [k for k in side if k[1] * k[2] >= BIG_MK]
            print(f"{label}: {sum(1 for k in big if side[k][1] >= 0.9)} of {len(big)} points at M*K >= 32M "
                  "reach 90% of the copy ceiling")
        moved = sorted(common, key=lambda k: abs(math.log(rp[k][0] / bp[k][0])), reverse=True)
        outside = [k for k in moved if abs(rp[k][0] / bp[k][0] - 1) > threshold]
        if outside and show:
            print(f"{len(outside)} points moved by more than {100 * threshold:g}%; the {min(show, len(outside))} that moved most:")
            print_table(["variant", "K", "M", "baseline us", "run us", "ratio"],
                        [[k[0], k[1], k[2], bp[k][0], rp[k][0], f"{rp[k][0] / bp[k][0]:.3f}"] for k in outside[:show]])
    return medians


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--make-baseline", metavar="RUN.json", help="summarise RUN.json into --out STEM.{json,md}")
    mode.add_argument("--compare", nargs="+", metavar="JSON", help="RUN.json [BASELINE.json]")
    ap.add_argument("--out", metavar="STEM", help="with --make-baseline: where to write STEM.json and STEM.md")
    ap.add_argument("--note", default="", help="with --make-baseline: a line on what the run measured")
    ap.add_argument("--threshold", type=float, default=0.05, help="list variant points that moved more (default 0.05)")
    ap.add_argument("--show", type=int, default=20, help="at most this many moved points (default 20)")
    ap.add_argument("--fail-over", type=float, metavar="F", help="exit 1 if a group's median ratio is above F")
    args = ap.parse_args()

    if args.make_baseline:
        if not args.out:
            fail("--make-baseline needs --out STEM")
        base = summarise_run(read_json(args.make_baseline), args.note)
        stem = pathlib.Path(args.out)
        stem.parent.mkdir(parents=True, exist_ok=True)
        json_path, md_path = stem.with_name(stem.name + ".json"), stem.with_name(stem.name + ".md")
        json_path.write_text(json.dumps(base, separators=(",", ":"), sort_keys=False) + "\n")
        write_markdown(base, md_path)
        print(f"wrote {json_path} ({json_path.stat().st_size} bytes) and {md_path}")
        return 0

    if len(args.compare) > 2:
        fail("--compare takes RUN.json and at most one BASELINE.json")
    run = load_side(args.compare[0])
    if len(args.compare) == 2:
        base_path = pathlib.Path(args.compare[1])
    else:
        kind = gpu_kind(run["environment"].get("gpu"))
        base_path = BASELINES / f"{kind}.json"
        if not kind or not base_path.is_file():
            fail(f"no baseline for the run's GPU ({run['environment'].get('gpu')}) in {BASELINES}; name one")
    medians = compare(run, load_side(base_path), args.threshold, args.show)
    if args.fail_over is not None:
        over = {g: m for g, m in medians.items() if m > args.fail_over}
        if over:
            print("above --fail-over %g: %s" % (args.fail_over, ", ".join(f"{g} ({m:.3f})" for g, m in over.items())))
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
