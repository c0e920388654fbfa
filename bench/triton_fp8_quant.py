#!/usr/bin/env python3
"""Triton baseline for kiln's FP8 activation quantizer (vLLM's per_token_group_quant_fp8 kernel).

Modes:
  --shapes M,K;M,K;...   kernel time per shape (batches of 10 launches between CUDA events, queued behind a GPU sleep,
                         inputs rotated over 2x L2; median), JSON on stdout
  --first-call           in a fresh process: time from just before the first call to its result
                         (Triton JIT compile + load + run), JSON on stdout
  --cold-warm            runs --first-call in two fresh processes: empty TRITON_CACHE_DIR, then warm
Run on the device (PyTorch + Triton installed there).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

T_START = time.perf_counter()

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

GROUP = 128
FP8_MAX = 448.0
EPS = 1e-10


@triton.jit
def _per_token_group_quant_fp8(y_ptr, y_q_ptr, y_s_ptr, group_size, y_num_columns, eps, fp8_min, fp8_max,
                               BLOCK: tl.constexpr):
    groups_per_row = y_num_columns // group_size
    g_id = tl.program_id(0).to(tl.int64)
    row = g_id // groups_per_row
    row_g_id = g_id % groups_per_row
    y_ptr += row * y_num_columns + row_g_id * group_size
    y_q_ptr += g_id * group_size
    y_s_ptr += g_id
    cols = tl.arange(0, BLOCK)
    mask = cols < group_size
    y = tl.load(y_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    absmax = tl.maximum(tl.max(tl.abs(y)), eps)
    y_s = absmax / fp8_max
    y_q = tl.clamp(y / y_s, fp8_min, fp8_max).to(y_q_ptr.dtype.element_ty)
    tl.store(y_q_ptr + cols, y_q, mask=mask)
    tl.store(y_s_ptr, y_s)


def quantize(x, q, s):
    m, k = x.shape
    _per_token_group_quant_fp8[(m * (k // GROUP),)](x, q, s, GROUP, k, EPS, -FP8_MAX, FP8_MAX, BLOCK=GROUP,
                                                     num_warps=1)


def pools(m, k, copies):
    # Why one tensor per pool: thousands of tiny tensors would cost more to make than to time.
    xs = torch.randn(copies, m, k, device="cuda", dtype=torch.bfloat16)
    qs = torch.empty(copies, m, k, device="cuda", dtype=torch.float8_e4m3fn)
    ss = torch.empty(copies, m, k // GROUP, device="cuda", dtype=torch.float32)
    return xs, qs, ss


# Why 100 us per launch: Python launches a Triton kernel in tens of us; the sleep ahead of the
# timed launches must outlast queuing all of them, else host latency is timed.
SLEEP_US_PER_LAUNCH = 100
SLEEP_CYCLES_PER_US = 2000  # about the H200's 1.98 GHz; a lower clock only sleeps longer
BATCH = 10  # launches per event pair, as kiln-bench (bench/cpp/bench_device.cpp, ARM_BATCH)


def time_shape(m, k, iters):
    """Median kernel time as kiln times it: batches of BATCH launches between one event pair, all
    queued back to back behind a GPU sleep, inputs rotated over copies spanning twice the L2."""
    bytes_moved = 3 * m * k + 4 * m * k // GROUP
    footprint = 2 * m * k + m * k + 4 * m * k // GROUP
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    copies = max(1, -(-2 * l2 // footprint))
    xs, qs, ss = pools(m, k, copies)
    for i in range(3):
        quantize(xs[i % copies], qs[i % copies], ss[i % copies])
    batches = max(1, iters // BATCH)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(batches)]
    stops = [torch.cuda.Event(enable_timing=True) for _ in range(batches)]
    torch.cuda.synchronize()
    sleep_us = max(200, SLEEP_US_PER_LAUNCH * iters)
    torch.cuda._sleep(sleep_us * SLEEP_CYCLES_PER_US)
    t0 = time.perf_counter()
    for b in range(batches):
        starts[b].record()
        for i in range(BATCH):
            j = (3 + b * BATCH + i) % copies
            quantize(xs[j], qs[j], ss[j])
        stops[b].record()
    queue_us = (time.perf_counter() - t0) * 1e6
    torch.cuda.synchronize()
    times = sorted(a.elapsed_time(b) * 1e3 / BATCH for a, b in zip(starts, stops))
    median_us = times[len(times) // 2] if len(times) % 2 else (times[len(times) // 2 - 1] + times[len(times) // 2]) / 2
    del xs, qs, ss
    return {"m": m, "k": k, "median_us": median_us, "gbps": bytes_moved / median_us / 1e3, "copies": copies,
            "queued_behind_sleep": queue_us < sleep_us}


def first_call():
    x = torch.randn(128, 7168, device="cuda", dtype=torch.bfloat16)
    q = torch.empty(128, 7168, device="cuda", dtype=torch.float8_e4m3fn)
    s = torch.empty(128, 7168 // GROUP, device="cuda", dtype=torch.float32)
    torch.cuda.synchronize()  # CUDA context up: not Triton's cost
    t0 = time.perf_counter()
    quantize(x, q, s)
    torch.cuda.synchronize()
    t1 = time.perf_counter()
    return {"first_call_ms": (t1 - t0) * 1e3, "process_to_result_ms": (t1 - T_START) * 1e3}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes")
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--first-call", action="store_true")
    ap.add_argument("--cold-warm", action="store_true")
    args = ap.parse_args()
    if args.first_call:
        print(json.dumps(first_call()))
        return
    if args.cold_warm:
        out = {}
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, TRITON_CACHE_DIR=cache)
            for label in ("cold", "warm"):
                t0 = time.perf_counter()
                res = subprocess.run([sys.executable, __file__, "--first-call"], env=env, check=True,
                                     capture_output=True, text=True)
                wall = (time.perf_counter() - t0) * 1e3
                out[label] = dict(json.loads(res.stdout.strip().splitlines()[-1]), process_wall_ms=wall)
        print(json.dumps(out))
        return
    rows = []
    for item in args.shapes.split(";"):
        m, k = (int(v) for v in item.split(","))
        rows.append(time_shape(m, k, args.iters))
    print(json.dumps({"triton": triton.__version__, "torch": torch.__version__, "rows": rows}))


if __name__ == "__main__":
    main()
