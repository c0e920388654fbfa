#!/usr/bin/env python3
"""Per-call host overhead of kiln's op in eager mode, on a GPU: each call path enqueued in batches
(synchronised between batches, never inside the timed loop, so the launch queue never fills),
against torch.empty_like on the same tensor. Writes OUT.json and OUT.md.

    python_overhead.py --out PREFIX [--calls N] [--batch B]
"""
import argparse
import json
import statistics
import time

import torch

import kiln
from kiln import _kiln, _variant


def per_call_us(fn, calls, batch):
    for _ in range(batch):  # warm-up: loads the module, fills caches
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(calls // batch):
        torch.cuda.synchronize()
        start = time.perf_counter_ns()
        for _ in range(batch):
            fn()
        samples.append((time.perf_counter_ns() - start) / batch / 1000)
    torch.cuda.synchronize()
    return statistics.median(samples), min(samples)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--batch", type=int, default=200)
    args = parser.parse_args()
    rows = []
    for m, k in ((1, 7168), (128, 7168)):
        x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        q = torch.empty(m, k, dtype=torch.float8_e4m3fn, device="cuda")
        s = torch.empty(m, k // 128, dtype=torch.float32, device="cuda")
        v = _variant.variant("bfloat16", 128, "e4m3", "row_major", False)
        stream = torch.cuda.current_stream().cuda_stream
        paths = {
            "torch.empty_like(x)": lambda: torch.empty_like(x),
            "kiln.per_token_group_quant_fp8(x)": lambda: kiln.per_token_group_quant_fp8(x),
            "torch.ops.kiln.per_token_group_quant(x, ...)":
                lambda: torch.ops.kiln.per_token_group_quant(x, 128, 1e-10, "e4m3", "row_major", False, False),
            "extension call only (preallocated, raw pointers)":
                lambda: _kiln.quantize(0, v, x.data_ptr(), q.data_ptr(), s.data_ptr(), m, k, 0, 1e-10, stream),
        }
        for name, fn in paths.items():
            median, best = per_call_us(fn, args.calls, args.batch)
            rows.append({"m": m, "k": k, "path": name, "median_us": round(median, 3), "min_us": round(best, 3)})
    base = {(r["m"], r["k"]): r["median_us"] for r in rows if r["path"] == "torch.empty_like(x)"}
    for r in rows:
        r["added_us"] = round(r["median_us"] - base[(r["m"], r["k"])], 3)
    info = {"torch": torch.__version__, "device": torch.cuda.get_device_name(), "kiln": kiln.__version__,
            "calls": args.calls, "batch": args.batch, "goal_added_us": 3.0, "rows": rows}
    with open(args.out + ".json", "w") as f:
        json.dump(info, f, indent=2)
    lines = [f"# kiln Python op: eager host overhead per call ({info['device']}, torch {info['torch']})", "",
             "| M x K | path | median us/call | min | added over empty_like |", "| --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['m']}x{r['k']} | {r['path']} | {r['median_us']} | {r['min_us']} | {r['added_us']} |")
    with open(args.out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
