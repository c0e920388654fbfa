"""The set-up scripts (tools/bootstrap, tools/build, tools/test-hardening) as tools/main and
tools/test run them: a missing CUDA toolkit is named even when every package is installed, a
failing build or configure step shows its own output instead of a bare exit status, and
KILN_BUILD_DIR is the build folder of every script."""
import os
import subprocess

import pytest


def run(script, env, timeout=300):
    return subprocess.run([str(script)], capture_output=True, text=True, env={**os.environ, **env},
                          timeout=timeout)


def test_bootstrap_checks_toolkit(source_root):
    # Why this runs without installing anything: the toolkit check comes before the package check.
    done = run(source_root / 'tools/bootstrap', {'KILN_NVRTC_ROOT': '/nonexistent/cuda'})
    assert done.returncode != 0, f'bootstrap fails without a toolkit (exit {done.returncode})'
    assert '/nonexistent/cuda' in done.stderr and 'KILN_NVRTC_ROOT' in done.stderr, \
        f'bootstrap names the folder and the variable\n{done.stderr}'


def test_build_shows_failing_step(source_root, tmp_path):
    # A build folder under a regular file: meson setup itself fails, at once and on any machine,
    # and ./build (someone else's) stays out of it.
    blocker = tmp_path / 'not-a-folder'
    blocker.write_text('')
    build_dir = blocker / 'build'
    done = run(source_root / 'tools/build', {'KILN_BUILD_DIR': str(build_dir)})
    assert done.returncode != 0, f'tools/build fails when meson setup fails (exit {done.returncode})'
    assert 'meson setup failed' in done.stderr and str(build_dir) in done.stderr, \
        f'tools/build names the failing step and the folder\n{done.stderr[-2000:]}'
    assert 'Not a directory' in done.stderr, f"meson's own output is shown\n{done.stderr[-2000:]}"


@pytest.fixture
def stand_ins(tmp_path):
    """Stand-ins for meson, ninja and the built kiln that only log their arguments: what matters is
    which folder tools/test and tools/main hand them, not a real build. Returns (env, build folder, log)."""
    log = tmp_path / 'calls.log'
    fake_bin = tmp_path / 'fake-bin'
    build_dir = tmp_path / 'elsewhere'
    (build_dir / 'tools').mkdir(parents=True)
    fake_bin.mkdir()
    for program in (fake_bin / 'meson', fake_bin / 'ninja', build_dir / 'tools' / 'kiln'):
        program.write_text(f'#!/bin/sh\necho "{program.name} $*" >> "{log}"\n')
        program.chmod(0o755)
    env = {'PATH': f"{fake_bin}:{os.environ['PATH']}", 'KILN_BUILD_DIR': str(build_dir), 'KILN_PYTHON': '0',
           'KILN_HARDENING': '0'}
    return env, build_dir, log


def test_tools_test_uses_kiln_build_dir(source_root, stand_ins):
    env, build_dir, log = stand_ins
    done = run(source_root / 'tools/test', env)
    calls = log.read_text() if log.exists() else ''
    assert done.returncode == 0 and f'meson test -C {build_dir} ' in calls, \
        f'tools/test runs meson test in $KILN_BUILD_DIR\n{calls}{done.stderr[-2000:]}'


def test_tools_main_uses_kiln_build_dir(source_root, stand_ins):
    env, build_dir, log = stand_ins
    done = run(source_root / 'tools/main', env)
    calls = log.read_text() if log.exists() else ''
    assert done.returncode == 0 and 'kiln info' in calls and \
        f'kiln dump --arch auto --out {build_dir}/kiln-dump' in calls, \
        f"tools/main runs $KILN_BUILD_DIR's kiln and dumps there\n{calls}{done.stderr[-2000:]}"


def hardening_packages_installed():
    # Why ask: tools/test-hardening's bootstrap would install them, which a test must not do.
    done = subprocess.run(['dpkg-query', '-W', '-f=${Status}\n', 'clang', 'libclang-rt-14-dev'],
                          capture_output=True, text=True)
    return done.returncode == 0 and done.stdout.count('install ok installed') == 2


def test_hardening_shows_failing_configure(source_root, tmp_path):
    if not hardening_packages_installed():
        # Why a failure unless hardening is off: tools/test installs them before this suite runs.
        assert os.environ.get('KILN_HARDENING', '1') == '0', \
            'clang and libclang-rt-14-dev are installed (tools/test installs them unless KILN_HARDENING=0)'
        pytest.skip('KILN_HARDENING=0 and clang or libclang-rt-14-dev is not installed')
    # A compiler that does not exist: meson setup fails at once, with its error on stdout.
    compiler = '/nonexistent/kiln-c++'
    done = run(source_root / 'tools/test-hardening', {'KILN_HARDENING_STEPS': 'asan',
                                                      'KILN_HARDENING_PREFIX': str(tmp_path / 'build-'),
                                                      'CXX': compiler})
    shown = done.stdout + done.stderr
    assert done.returncode != 0 and 'asan: exit 1' in done.stderr, \
        f'tools/test-hardening fails when meson setup fails (exit {done.returncode})\n{shown[-2000:]}'
    assert 'Unknown compiler' in shown and compiler in shown, f"tools/test-hardening shows meson's output\n{shown[-2000:]}"
