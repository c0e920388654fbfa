#!/usr/bin/env python3
"""CuPy RawModule as kiln's JIT peer: first-function time for the same kernel source in a fresh
process, with an empty and with a warm CuPy kernel cache (CUPY_CACHE_DIR).

  cupy_jit_peer.py --source FILE.cu --include DIR --entry NAME [--arch sm_90a]
Prints one JSON object: {"cold": {...}, "warm": {...}} with in-process times (ms) from just
before RawModule to the function handle (context already up) and the whole process wall time.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def child(source, include, entry, arch):
    t_start = time.perf_counter()
    import cupy  # noqa: F401
    cupy.cuda.Device(0).use()
    cupy.cuda.runtime.free(cupy.cuda.runtime.malloc(256))  # context up: not the JIT's cost
    with open(source) as f:
        code = f.read()
    t0 = time.perf_counter()
    module = cupy.RawModule(code=code, options=("-std=c++17", "-I" + include, "--gpu-architecture=" + arch))
    module.get_function(entry)
    t1 = time.perf_counter()
    print(json.dumps({"first_function_ms": (t1 - t0) * 1e3, "process_to_function_ms": (t1 - t_start) * 1e3}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--include", required=True)
    ap.add_argument("--entry", required=True)
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--child", action="store_true")
    args = ap.parse_args()
    if args.child:
        child(args.source, args.include, args.entry, args.arch)
        return
    out = {}
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, CUPY_CACHE_DIR=cache)
        for label in ("cold", "warm"):
            t0 = time.perf_counter()
            res = subprocess.run([sys.executable, __file__, "--child", "--source", args.source, "--include",
                                  args.include, "--entry", args.entry, "--arch", args.arch],
                                 env=env, check=True, capture_output=True, text=True)
            wall = (time.perf_counter() - t0) * 1e3
            out[label] = dict(json.loads(res.stdout.strip().splitlines()[-1]), process_wall_ms=wall)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
