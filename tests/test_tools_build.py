#!/usr/bin/env python3
"""The set-up scripts (tools/bootstrap, tools/build, tools/test-hardening) as tools/main and
tools/test run them: a missing CUDA toolkit is named even when every package is installed, a
failing build or configure step shows its own output instead of a bare exit status, and
KILN_BUILD_DIR is the build folder of every script.

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


def test_scripts_use_kiln_build_dir(root, tmp):
    # Stand-ins for meson, ninja and the built kiln that only log their arguments: what matters is
    # which folder tools/test and tools/main hand them, not a real build.
    log = tmp / 'calls.log'
    fake_bin = tmp / 'fake-bin'
    build_dir = tmp / 'elsewhere'
    (build_dir / 'tools').mkdir(parents=True)
    fake_bin.mkdir()
    for program in (fake_bin / 'meson', fake_bin / 'ninja', build_dir / 'tools' / 'kiln'):
        program.write_text(f'#!/bin/sh\necho "{program.name} $*" >> "{log}"\n')
        program.chmod(0o755)
    env = {'PATH': f"{fake_bin}:{os.environ['PATH']}", 'KILN_BUILD_DIR': str(build_dir), 'KILN_PYTHON': '0',
           'KILN_HARDENING': '0'}
    done = run(root / 'tools/test', env)
    calls = log.read_text() if log.exists() else ''
    check(done.returncode == 0 and f'meson test -C {build_dir} ' in calls,
          'tools/test runs meson test in $KILN_BUILD_DIR', calls + done.stderr[-2000:])
    log.unlink(missing_ok=True)
    done = run(root / 'tools/main', env)
    calls = log.read_text() if log.exists() else ''
    check(done.returncode == 0 and 'kiln info' in calls and f'kiln dump --arch auto --out {build_dir}/kiln-dump' in calls,
          "tools/main runs $KILN_BUILD_DIR's kiln and dumps there", calls + done.stderr[-2000:])


def hardening_packages_installed():
    # Why ask: tools/test-hardening's bootstrap would install them, which a test must not do.
    done = subprocess.run(['dpkg-query', '-W', '-f=${Status}\n', 'clang', 'libclang-rt-14-dev'],
                          capture_output=True, text=True)
    return done.returncode == 0 and done.stdout.count('install ok installed') == 2


def test_hardening_shows_failing_configure(root, tmp):
    if not hardening_packages_installed():
        # Why a failure unless hardening is off: tools/test installs them before this suite runs.
        check(os.environ.get('KILN_HARDENING', '1') == '0',
              'clang and libclang-rt-14-dev are installed (tools/test installs them unless KILN_HARDENING=0)')
        print('skip: KILN_HARDENING=0 and clang or libclang-rt-14-dev is not installed')
        return
    # A compiler that does not exist: meson setup fails at once, with its error on stdout, which
    # the asan step used to send to /dev/null.
    compiler = '/nonexistent/kiln-c++'
    done = run(root / 'tools/test-hardening', {'KILN_HARDENING_STEPS': 'asan', 'KILN_HARDENING_PREFIX': str(tmp / 'build-'),
                                               'CXX': compiler})
    shown = done.stdout + done.stderr
    check(done.returncode != 0 and 'asan: exit 1' in done.stderr,
          f'tools/test-hardening fails when meson setup fails (exit {done.returncode})', shown[-2000:])
    check('Unknown compiler' in shown and compiler in shown, "tools/test-hardening shows meson's output", shown[-2000:])


def main():
    root = pathlib.Path(sys.argv[1]).resolve()
    test_bootstrap_checks_toolkit(root)
    with tempfile.TemporaryDirectory() as tmp:
        test_build_shows_failing_step(root, pathlib.Path(tmp))
        test_hardening_shows_failing_configure(root, pathlib.Path(tmp))
        test_scripts_use_kiln_build_dir(root, pathlib.Path(tmp))
    return exit_status()


if __name__ == '__main__':
    sys.exit(main())
