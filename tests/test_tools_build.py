#!/usr/bin/env python3
"""The set-up scripts (tools/bootstrap, tools/build) as tools/main and tools/test run them: a missing
CUDA toolkit is named even when every package is installed, and a failing build step shows its own
output instead of a bare exit status.

Usage: test_tools_build.py SOURCE_ROOT
"""
import os
import pathlib
import subprocess
import sys
import tempfile
from checks import check, exit_status

def run(script, env, timeout=300):
    return subprocess.run([str(script)], capture_output=True, text=True, env={**os.environ, **env},
                          timeout=timeout)


def test_bootstrap_checks_toolkit(root):
    # Why this runs without installing anything: the toolkit check comes before the package check.
    done = run(root / 'tools/bootstrap', {'KILN_NVRTC_ROOT': '/nonexistent/cuda'})
    check(done.returncode != 0, f'bootstrap fails without a toolkit (exit {done.returncode})')
    check('/nonexistent/cuda' in done.stderr and 'KILN_NVRTC_ROOT' in done.stderr,
          'bootstrap names the folder and the variable', done.stderr)


def test_build_shows_failing_step(root, tmp):
    # A build folder under a regular file: meson setup itself fails, at once and on any machine,
    # and ./build (someone else's) stays out of it.
    blocker = tmp / 'not-a-folder'
    blocker.write_text('')
    build_dir = blocker / 'build'
    done = run(root / 'tools/build', {'KILN_BUILD_DIR': str(build_dir)})
    check(done.returncode != 0, f'tools/build fails when meson setup fails (exit {done.returncode})')
    check('meson setup failed' in done.stderr and str(build_dir) in done.stderr,
          'tools/build names the failing step and the folder', done.stderr[-2000:])
    # meson's own words, which tools/build used to send to /dev/null.
    check('Not a directory' in done.stderr, "meson's output is shown", done.stderr[-2000:])


def main():
    root = pathlib.Path(sys.argv[1]).resolve()
    test_bootstrap_checks_toolkit(root)
    with tempfile.TemporaryDirectory() as tmp:
        test_build_shows_failing_step(root, pathlib.Path(tmp))
    return exit_status()


if __name__ == '__main__':
    sys.exit(main())
