#!/usr/bin/env python3
"""What a call through torch.ops.kiln.* (the call a compiled graph makes) costs on the host beyond
the op's body, on any machine, GPU or not: the body's one C++ call (kiln._kiln_torch.quantize,
which allocates and launches) is replaced by one that returns ready tensors, so each row times
PyTorch's dispatcher and kiln's Python framing alone. A CPU tensor stands in for x; the dispatch
does not depend on the device. Rows take turns, a round of batches each, so a slow spell of the
host touches them all alike. Prints a table; with --out, writes OUT.md as well.

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
    parser.add_argument("--calls", type=int, default=200000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    if _torch_ops.fast_quantize is None:
        raise SystemExit("op_dispatch: kiln._kiln_torch is not built; the op's body would take the Python path")
    x = torch.zeros(4, 256, dtype=torch.bfloat16)
    q = torch.empty(4, 256, dtype=torch.float8_e4m3fn)
    scales = torch.empty(4, 2)
    _torch_ops.fast_quantize = lambda *_: (q, scales)
    op, op_out = torch.ops.kiln.per_token_group_quant.default, torch.ops.kiln.per_token_group_quant_out.default
    flags = (128, 1e-10, "e4m3", "row_major", False, False)
    paths = {
        "torch.empty_like(x) (reference)": lambda: torch.empty_like(x),
        "the op's body alone": lambda: _torch_ops._fast_body(x, None, *flags),
        "torch.ops.kiln.per_token_group_quant": lambda: op(x, *flags),
        "torch.ops.kiln.per_token_group_quant_out": lambda: op_out(x, q, *flags),
    }
    samples = {name: [] for name in paths}
    for fn in paths.values():
        batch_samples(fn, 2, args.batch)
    for _ in range(args.rounds):
        for name, fn in paths.items():
            samples[name] += batch_samples(fn, max(1, args.calls // args.batch // args.rounds), args.batch)
    with torch.inference_mode():
        xi, qi = x.clone(), q.clone()
        inference = batch_samples(lambda: op_out(xi, qi, *flags), max(1, args.calls // args.batch), args.batch)
    samples["torch.ops.kiln.per_token_group_quant_out, inference_mode"] = inference
    lines = [f"# kiln: host cost of a call through torch.ops.kiln.* (torch {torch.__version__}, kiln "
             f"{kiln.__version__}, body stubbed)", "", "| path | median us/call | min |", "| --- | --- | --- |"]
    for name, taken in samples.items():
        lines.append(f"| {name} | {statistics.median(taken):.3f} | {min(taken):.3f} |")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out:
        with open(args.out + ".md", "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
