"""When the GPU suite and `kiln selftest` skip, and when they fail, under real processes and fake
drivers put first on the library path:

- no libcuda.so.1 at all: the suite skips (exit 77), selftest says "no GPU" and succeeds, and the
  message names libcuda.so.1 once ("libcuda.so.1 not found: cannot open shared object file: ...");
- a libcuda.so.1 that lacks an entry kiln requires, or whose cuInit fails: both fail (exit 1),
  saying why; neither may pass for "no GPU".

Usage: test_gpu_skip_policy.py KILN GPU_MAIN_PROBE FAKE_INIT_FAILS_SO FAKE_LACKS_REQUIRED_SO
"""
import ctypes
import os
import subprocess
import sys
import tempfile

from checks import check, exit_status


def run(args, library_dir=None):
    env = dict(os.environ)
    env['KILN_CACHE'] = '0'
    env['KILN_LOG_LEVEL'] = 'warn'
    if library_dir is not None:
        env['LD_LIBRARY_PATH'] = library_dir + (':' + env['LD_LIBRARY_PATH'] if env.get('LD_LIBRARY_PATH') else '')
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=240)
    return done.returncode, done.stdout + done.stderr


def real_driver_present():
    try:
        ctypes.CDLL('libcuda.so.1')
        return True
    except OSError:
        return False


def main():
    kiln, probe, init_fails, lacks_required = sys.argv[1:5]

    if real_driver_present():
        print('note: this machine has a libcuda.so.1, so the no-driver case cannot be made here; '
              'the unusable-driver cases below still run')
    else:
        code, out = run([probe])
        check(code == 77, 'no driver: the GPU suite skips (77)', f'exit {code}\n{out}')
        check('SKIP: no NVIDIA driver: libcuda.so.1 not found: cannot open shared object file' in out,
              'no driver: the skip says why', out)
        code, out = run([kiln, 'selftest'])
        check(code == 0, 'no driver: kiln selftest succeeds', f'exit {code}\n{out}')
        check('selftest: no GPU (libcuda.so.1 not found: cannot open shared object file: No such file or directory;'
              in out, 'no driver: selftest names libcuda.so.1 once, then the loader\'s words', out)
        check(out.count('libcuda.so.1') == 1, 'no driver: "libcuda.so.1" appears once in selftest\'s output', out)
        code, out = run([kiln, 'info'])
        check(code == 0, 'no driver: kiln info succeeds', f'exit {code}\n{out}')
        check('libcuda.so.1 not found: cannot open shared object file' in out and
              'libcuda.so.1: cannot open' not in out, 'no driver: kiln info names libcuda.so.1 once', out)

    cases = [
        (init_fails, 'cuInit fails', 'cuInit failed: CUDA_ERROR_UNKNOWN'),
        (lacks_required, 'a required entry is missing', 'lacks cuDeviceGetCount: the NVIDIA driver is too old'),
    ]
    for library, what, words in cases:
        with tempfile.TemporaryDirectory(prefix='kiln-fake-driver-') as folder:
            os.symlink(os.path.abspath(library), os.path.join(folder, 'libcuda.so.1'))
            code, out = run([probe], folder)
            check(code not in (0, 77), f'{what}: the GPU suite fails, neither skips nor passes', f'exit {code}\n{out}')
            check('FAIL: the NVIDIA driver is there but unusable' in out and words in out,
                  f'{what}: the GPU suite says why', out)
            code, out = run([kiln, 'selftest'], folder)
            check(code == 1, f'{what}: kiln selftest fails (exit 1)', f'exit {code}\n{out}')
            check('selftest FAILED: the NVIDIA driver is there but unusable' in out and words in out,
                  f'{what}: kiln selftest says why', out)
    return exit_status()


if __name__ == '__main__':
    sys.exit(main())
