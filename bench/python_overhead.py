#!/usr/bin/env python3
"""Per-call host overhead of kiln's op in eager mode, on a GPU: each call path enqueued in batches
(synchronised between batches, never inside the timed loop, so the launch queue never fills),
against torch.empty_like on the same tensor, with a native one-kernel op (torch.abs) and the op's
two allocations alone as references for what a launch and an allocation cost on this host. The
paths take turns, a round of batches each, so a slow spell of the host touches them all alike.
The public function checks its arguments in Python and calls the op, whose kernel is C++ on
PyTorch's stable ABI (kiln._kiln_ops); the op's rows call it without the public function. Writes
OUT.json and OUT.md.

    python_overhead.py --out PREFIX [--calls N] [--batch B] [--rounds R]
"""
import argparse
import json
import statistics

import torch

import kiln
from kiln import _kiln, _torch_ops, _variant

from host_timing import batch_samples


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=10)
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
            # What any native one-kernel op costs on this host: its allocation and one launch.
            "torch.abs(x) (native: allocates, one launch)": lambda: torch.abs(x),
            "torch.empty(q) + torch.empty(scales) (the op's two allocations)":
                lambda: (torch.empty(m, k, dtype=torch.float8_e4m3fn, device="cuda"),
                         torch.empty(m, k // 128, dtype=torch.float32, device="cuda")),
            "kiln.per_token_group_quant_fp8(x)": lambda: kiln.per_token_group_quant_fp8(x),
            "kiln.per_token_group_quant_fp8(x, out_q=q)": lambda: kiln.per_token_group_quant_fp8(x, out_q=q),
            "kiln.per_token_group_quant_fp8(x, column_major_scales=True, tma_aligned_scales=True)":
                lambda: kiln.per_token_group_quant_fp8(x, column_major_scales=True, tma_aligned_scales=True),
            "torch.ops.kiln.per_token_group_quant(x, ...)":
                lambda: torch.ops.kiln.per_token_group_quant(x, 128, 1e-10, "e4m3", "row_major", False, False),
            "the op's dispatcher entry (OpOverload._op, allocates)":
                lambda: _torch_ops._CALL(x, 128, 1e-10, "e4m3", "row_major", False, False, False, None),
            "extension call only (preallocated, raw pointers)":
                lambda: _kiln.quantize(0, v, x.data_ptr(), q.data_ptr(), s.data_ptr(), m, k, 0, 1e-10, stream),
        }
        samples = {name: [] for name in paths}
        for fn in paths.values():  # warm-up: loads the module, fills caches
            batch_samples(fn, 1, args.batch, torch.cuda.synchronize)
        for _ in range(args.rounds):
            for name, fn in paths.items():
                samples[name] += batch_samples(fn, args.calls // args.batch // args.rounds, args.batch,
                                               torch.cuda.synchronize)
        for name, taken in samples.items():
            rows.append({"m": m, "k": k, "path": name, "median_us": round(statistics.median(taken), 3),
                         "min_us": round(min(taken), 3)})
    base = {(r["m"], r["k"]): r["median_us"] for r in rows if r["path"] == "torch.empty_like(x)"}
    for r in rows:
        r["added_us"] = round(r["median_us"] - base[(r["m"], r["k"])], 3)
    info = {"torch": torch.__version__, "device": torch.cuda.get_device_name(), "kiln": kiln.__version__,
            "calls": args.calls, "batch": args.batch, "rounds": args.rounds, "goal_added_us": 3.0, "rows": rows}
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
