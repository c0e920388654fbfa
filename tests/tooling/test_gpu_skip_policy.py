"""When the GPU suite and `kiln selftest` skip, and when they fail, under real processes and fake
drivers put first on the library path:

- no libcuda.so.1 at all: the suite skips (exit 77), selftest says "no GPU" and succeeds, and the
  message names libcuda.so.1 once ("libcuda.so.1 not found: cannot open shared object file: ...");
- a libcuda.so.1 that lacks an entry kiln requires, or whose cuInit fails: both fail (exit 1),
  saying why; neither may pass for "no GPU"."""
import ctypes
import os
import subprocess

import pytest


def run(args, library_dir=None):
    env = dict(os.environ)
    env['KILN_CACHE'] = '0'
    env['KILN_LOG_LEVEL'] = 'warn'
    if library_dir is not None:
        env['LD_LIBRARY_PATH'] = str(library_dir) + (':' + env['LD_LIBRARY_PATH'] if env.get('LD_LIBRARY_PATH') else '')
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=240)
    return done.returncode, done.stdout + done.stderr


def real_driver_present():
    try:
        ctypes.CDLL('libcuda.so.1')
        return True
    except OSError:
        return False


@pytest.fixture(scope='module')
def no_driver():
    if real_driver_present():
        pytest.skip('this machine has a libcuda.so.1, so the no-driver case cannot be made here '
                    '(the unusable-driver cases still run)')


def test_no_driver_suite_skips(no_driver, gpu_main_probe):
    code, out = run([gpu_main_probe])
    assert code == 77, f'no driver: the GPU suite skips (77)\nexit {code}\n{out}'
    assert 'SKIP: no NVIDIA driver: libcuda.so.1 not found: cannot open shared object file' in out, \
        f'no driver: the skip says why\n{out}'


def test_no_driver_selftest_succeeds(no_driver, kiln):
    code, out = run([kiln, 'selftest'])
    assert code == 0, f'no driver: kiln selftest succeeds\nexit {code}\n{out}'
    assert 'selftest: no GPU (libcuda.so.1 not found: cannot open shared object file: No such file or directory;' \
        in out, f"no driver: selftest names libcuda.so.1 once, then the loader's words\n{out}"
    assert out.count('libcuda.so.1') == 1, f'no driver: "libcuda.so.1" appears once in selftest\'s output\n{out}'


def test_no_driver_info_succeeds(no_driver, kiln):
    code, out = run([kiln, 'info'])
    assert code == 0, f'no driver: kiln info succeeds\nexit {code}\n{out}'
    assert 'libcuda.so.1 not found: cannot open shared object file' in out and \
        'libcuda.so.1: cannot open' not in out, f'no driver: kiln info names libcuda.so.1 once\n{out}'


@pytest.fixture(params=[('fake_init_fails', 'cuInit fails', 'cuInit failed: CUDA_ERROR_UNKNOWN'),
                        ('fake_lacks_required', 'a required entry is missing',
                         'lacks cuDeviceGetCount: the NVIDIA driver is too old')],
                ids=['cuInit fails', 'required entry missing'])
def unusable_driver(request, tmp_path):
    """A folder whose libcuda.so.1 is one of the fake drivers; what it does; the words expected."""
    fixture, what, words = request.param
    os.symlink(request.getfixturevalue(fixture), tmp_path / 'libcuda.so.1')
    return tmp_path, what, words


def test_unusable_driver_fails_the_suite(gpu_main_probe, unusable_driver):
    folder, what, words = unusable_driver
    code, out = run([gpu_main_probe], folder)
    assert code not in (0, 77), f'{what}: the GPU suite fails, neither skips nor passes\nexit {code}\n{out}'
    assert 'FAIL: the NVIDIA driver is there but unusable' in out and words in out, \
        f'{what}: the GPU suite says why\n{out}'


def test_unusable_driver_fails_selftest(kiln, unusable_driver):
    folder, what, words = unusable_driver
    code, out = run([kiln, 'selftest'], folder)
    assert code == 1, f'{what}: kiln selftest fails (exit 1)\nexit {code}\n{out}'
    assert 'selftest FAILED: the NVIDIA driver is there but unusable' in out and words in out, \
        f'{what}: kiln selftest says why\n{out}'
