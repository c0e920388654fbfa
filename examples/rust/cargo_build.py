#!/usr/bin/env python3
"""Build the Rust example offline with cargo, for Meson: cargo_build.py CARGO MANIFEST TARGET_DIR LIB_DIR OUTPUT.

Cargo builds into TARGET_DIR (under the Meson build folder), linking libkiln from LIB_DIR; the
binary is then copied to OUTPUT, so Meson sees one file it can run and track.
"""
import os
import shutil
import subprocess
import sys


def main():
    cargo, manifest, target_dir, lib_dir, output = sys.argv[1:]
    env = dict(os.environ, CARGO_TARGET_DIR=target_dir, KILN_LIB_DIR=lib_dir)
    subprocess.run([cargo, "build", "--offline", "--locked", "--quiet", "--manifest-path", manifest], env=env,
                   check=True)
    shutil.copy2(os.path.join(target_dir, "debug", "kiln-example"), output)


if __name__ == "__main__":
    main()
