#!/usr/bin/env python3
"""What a traced call of kiln's op costs on the host, on any machine, GPU or not: a call on meta
tensors runs the op's fake implementation, which asks C++ for the checks and the outputs'
geometry (kiln._kiln.plan), as torch.compile and FakeTensorMode do for every call they trace.
Rows: torch.empty_like on a meta tensor (reference), the plan alone, the fake alone, the op
through the dispatcher, and the public function. Rows take turns, a round of batches each, so a
slow spell of the host touches them all alike. Prints a table; with --out, writes OUT.md as well.

    op_dispatch.py [--out PREFIX] [--calls N] [--batch B] [--rounds R]
"""
import argparse
import statistics

import torch

import kiln
from kiln import _torch_ops

from host_timing import batch_samples


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    parser.add_argument("--calls", type=int, default=100000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    x = torch.empty(4, 256, dtype=torch.bfloat16, device="meta")
    flags = (128, 1e-10, "e4m3", "column_major_tma", False, False)
    op = torch.ops.kiln.per_token_group_quant.default
    paths = {
        "torch.empty_like(x) (reference)": lambda: torch.empty_like(x),
        "kiln._kiln.plan (checks and geometry)": lambda: _torch_ops._plan(x, None, None, *flags, False),
        "the fake implementation": lambda: _torch_ops._fake(x, *flags),
        "torch.ops.kiln.per_token_group_quant (meta)": lambda: op(x, *flags),
        "kiln.per_token_group_quant_fp8 (meta)":
            lambda: kiln.per_token_group_quant_fp8(x, column_major_scales=True, tma_aligned_scales=True),
    }
    samples = {name: [] for name in paths}
    for fn in paths.values():
        batch_samples(fn, 2, args.batch)
    for _ in range(args.rounds):
        for name, fn in paths.items():
            samples[name] += batch_samples(fn, max(1, args.calls // args.batch // args.rounds), args.batch)
    lines = [f"# kiln: host cost of a traced call (meta tensors; torch {torch.__version__}, kiln {kiln.__version__})",
             "", "| path | median us/call | min |", "| --- | --- | --- |"]
    for name, taken in samples.items():
        lines.append(f"| {name} | {statistics.median(taken):.3f} | {min(taken):.3f} |")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out:
        with open(args.out + ".md", "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
