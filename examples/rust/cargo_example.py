#!/usr/bin/env python3
"""The Rust example for Meson, which can neither run cargo's outputs nor a custom target as a test.

    cargo_example.py build CARGO MANIFEST TARGET_DIR LIB_DIR OUTPUT
        cargo build --offline into TARGET_DIR (under the Meson build folder), linking libkiln from
        LIB_DIR, then copy the binary to OUTPUT, one file Meson can track.
    cargo_example.py run BINARY ARGS...    run the built example (a test's program)
    cargo_example.py skip                  exit 77: no cargo on this machine
"""
import os
import shutil
import subprocess
import sys


def main():
    command, args = sys.argv[1], sys.argv[2:]
    if command == "build":
        cargo, manifest, target_dir, lib_dir, output = args
        env = dict(os.environ, CARGO_TARGET_DIR=target_dir, KILN_LIB_DIR=lib_dir)
        subprocess.run([cargo, "build", "--offline", "--locked", "--quiet", "--manifest-path", manifest], env=env,
                       check=True)
        shutil.copy2(os.path.join(target_dir, "debug", "kiln-example"), output)
        return 0
    if command == "run":
        return subprocess.run(args).returncode
    print("SKIP: cargo not found")
    return 77


if __name__ == "__main__":
    sys.exit(main())
