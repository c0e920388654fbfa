#!/usr/bin/env python3
"""CuPy RawModule as kiln's JIT peer: time to the function handles of the same kernel sources in a
fresh process, with an empty and with a warm CuPy kernel cache (CUPY_CACHE_DIR).

  cupy_jit_peer.py --source A.cu --entry A --source B.cu --entry B --include DIR [--runs N] [--option OPT ...]
Each --source pairs with the --entry at the same position. Prints one JSON object:
{"cupy": version, "nvrtc": [major, minor], "runs": N, "cold": {...}, "warm": {...}, "samples": {...}}
with medians over N fresh cache folders: in-process ms from just before the first RawModule to the
last function handle (context already up: not the JIT's cost), process start to that point, and
the whole process's wall time. The options are kiln's minus -arch: CuPy adds the current
device's arch itself, as a user's RawModule would.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def child(sources, entries, include, options):
    t_start = time.perf_counter()
    import cupy
    cupy.cuda.Device(0).use()
    cupy.cuda.runtime.free(cupy.cuda.runtime.malloc(256))  # context up: not the JIT's cost
    codes = []
    for path in sources:
        with open(path) as f:
            codes.append(f.read())
    options = list(options) + ["-I" + include]
    t0 = time.perf_counter()
    for code, entry in zip(codes, entries):
        cupy.RawModule(code=code, options=tuple(options)).get_function(entry)
    t1 = time.perf_counter()
    print(json.dumps({"first_function_ms": (t1 - t0) * 1e3, "process_to_function_ms": (t1 - t_start) * 1e3}))


def versions():
    import cupy
    try:
        from cupy_backends.cuda.libs import nvrtc
        nvrtc_version = list(nvrtc.getVersion())
    except Exception as error:  # the version is a label, not a requirement
        nvrtc_version = str(error)
    return cupy.__version__, nvrtc_version


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", action="append", required=True)
    ap.add_argument("--entry", action="append", required=True)
    ap.add_argument("--include", required=True)
    ap.add_argument("--option", action="append",
                    help="an NVRTC option (repeatable; default kiln's own: -std=c++17 -default-device)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--child", action="store_true")
    args = ap.parse_args()
    if len(args.source) != len(args.entry):
        ap.error("give one --entry per --source")
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    options = args.option or ["-std=c++17", "-default-device"]
    if args.child:
        child(args.source, args.entry, args.include, options)
        return
    samples = {"cold": [], "warm": []}
    command = [sys.executable, __file__, "--child", "--include", args.include]
    for option in options:
        command.append("--option=" + option)
    for source, entry in zip(args.source, args.entry):
        command += ["--source", source, "--entry", entry]
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, CUPY_CACHE_DIR=cache)
            for label in ("cold", "warm"):
                t0 = time.perf_counter()
                res = subprocess.run(command, env=env, capture_output=True, text=True)
                if res.returncode != 0:
                    sys.exit(f"cupy_jit_peer.py: the {label} child failed (exit {res.returncode}):\n{res.stderr}")
                wall = (time.perf_counter() - t0) * 1e3
                samples[label].append(dict(json.loads(res.stdout.strip().splitlines()[-1]), process_wall_ms=wall))
    out = {"runs": args.runs, "modules": len(args.source), "options": options, "samples": samples}
    out["cupy"], out["nvrtc"] = versions()
    for label, runs in samples.items():
        out[label] = {field: statistics.median(run[field] for run in runs) for field in runs[0]}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
