"""`kiln warm` into a folder nothing can be written to (/proc) fails and says why, instead of
"compiling" into it and exiting 0 while every store fails. As root the folder passes every
permission check; only the writability probe (create and remove a file) refuses it.

Usage: test_kiln_warm_unwritable.py KILN
"""
import os
import subprocess
import sys


def main():
    kiln = sys.argv[1]
    env = dict(os.environ, KILN_CACHE_DIR='/proc', KILN_LOG_LEVEL='warn')
    done = subprocess.run([kiln, 'warm', '--arch', 'sm_90a', '--jobs', '1'], env=env, capture_output=True,
                          text=True, timeout=240)
    out = done.stdout + done.stderr
    failures = 0
    if done.returncode == 0:
        print(f'FAILED: kiln warm into /proc exited 0\n{out}')
        failures += 1
    if "'/proc'" not in out or 'memory' not in out:
        print(f'FAILED: kiln warm does not say that /proc cannot hold the cache\n{out}')
        failures += 1
    if os.geteuid() == 0 and 'cannot create a file in it' not in out:
        print(f'FAILED: as root, the reason should be the failed probe\n{out}')
        failures += 1
    if failures == 0:
        print(f'ok: exit {done.returncode}; {out.strip().splitlines()[0] if out.strip() else ""}')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
