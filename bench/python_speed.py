#!/usr/bin/env python3
"""The Python op's speed, every variant at every shape of kiln-bench's variant sweep with
M*K >= 32e6, as a fraction of a copy of the same bytes on the same GPU: each point is a run of
back-to-back calls of the public function (host overhead included) between two CUDA events, and
the copy is torch's copy_ of a uint8 buffer half the variant's bytes (so it reads and writes them
all). Which kernels run follows the process's target (KILN_ARCH=compute_80: the path of a GPU
without the Hopper family). Writes OUT.json and OUT.md; exits 1 when a point is below --target.

    python_speed.py --out PREFIX [--calls N] [--target FRACTION]
"""
import argparse
import itertools
import json
import os
import statistics

import torch

import kiln

SHAPES = [(8192, 7168), (32768, 7168), (2048, 18432), (8192, 18432), (32768, 2048), (32768, 18432)]
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
# (column_major_scales, tma_aligned_scales, use_ue8m0, pack_ue8m0_scales) of each scale layout
LAYOUTS = {"row": (False, False, None, False), "col": (True, False, None, False),
           "col_tma": (True, True, None, False), "ue8m0_packed": (True, True, True, True)}


def variants():
    for dtype, output, layout, ue8m0, silu, group in itertools.product(
            DTYPES, ("e4m3", "int8"), LAYOUTS, (False, True), (False, True), (32, 64, 128)):
        if layout == "ue8m0_packed" and (output == "int8" or not ue8m0):
            continue
        if output == "int8" and ue8m0:
            continue
        yield dtype, output, layout, ue8m0, silu, group


def median_us(fn, calls, repeats=3):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1000 / calls)
    return statistics.median(samples)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--target", type=float, default=0.90)
    args = parser.parse_args()
    points, worst = [], None
    copies = {}  # bytes moved -> the copy's us, each measured once
    # Why x once per input shape: allocating and filling gigabytes per variant took most of the run.
    for (m, k), dtype, silu in itertools.product(SHAPES, DTYPES, (False, True)):
        x = torch.randn(m, 2 * k if silu else k, device="cuda", dtype=DTYPES[dtype])
        for _, output, layout, ue8m0, _, group in (v for v in variants() if v[0] == dtype and v[4] == silu):
            column_major, tma, _, packed = LAYOUTS[layout]
            quantize = kiln.per_token_group_quant_int8 if output == "int8" else kiln.per_token_group_quant_fp8
            call = lambda: quantize(x, group, 1e-10, column_major, tma, ue8m0, pack_ue8m0_scales=packed,  # noqa: E731
                                    fuse_silu_and_mul=silu)
            q, scales = call()
            moved = x.numel() * x.element_size() + q.numel() * q.element_size() + \
                scales.untyped_storage().nbytes()
            del q, scales
            us = median_us(call, args.calls)
            if moved not in copies:
                source = torch.empty(moved // 2, device="cuda", dtype=torch.uint8)
                target = torch.empty_like(source)
                copies[moved] = median_us(lambda: target.copy_(source), args.calls)
                del source, target
            copy_us = copies[moved]
            name = f"{dtype} {output} {layout}{' ue8m0' if ue8m0 else ''}{' silu' if silu else ''} g{group}"
            point = {"variant": name, "m": m, "k": k, "us": us, "copy_us": copy_us, "to_copy": copy_us / us}
            points.append(point)
            if worst is None or point["to_copy"] < worst["to_copy"]:
                worst = point
        del x
    device = torch.cuda.get_device_name()
    target_name = os.environ.get("KILN_ARCH", "the device's own")
    below = [p for p in points if p["to_copy"] < args.target]
    with open(args.out + ".json", "w") as out:
        json.dump({"device": device, "arch": target_name, "points": points, "worst": worst}, out, indent=1)
    ratios = [p["to_copy"] for p in points]
    lines = [f"Python op against a copy of the same bytes, {device}, target {target_name}, "
             f"{len(points)} points (M*K >= 32e6)", "",
             "| points | median | worst | worst at | below target |", "| --- | --- | --- | --- | --- |",
             f"| {len(points)} | {statistics.median(ratios):.3f} | {worst['to_copy']:.3f} | "
             f"{worst['variant']} {worst['m']}x{worst['k']} | {len(below)} below {args.target} |"]
    with open(args.out + ".md", "w") as out:
        out.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    raise SystemExit(1 if below else 0)


if __name__ == "__main__":
    main()
