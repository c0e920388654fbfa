#!/usr/bin/env python3
"""`kiln info`, the diagnostic command: a bad KILN_ARCH is reported beside everything else (exit
1 at the end), and each bad cache setting or switch is one warning and exit 0, as the README
promises.

Usage: test_cli_info.py KILN_EXECUTABLE
"""
import json
import os
import pathlib
import subprocess
import sys
import tempfile
from checks import check, exit_status

def info(kiln, env, *args):
    return subprocess.run([kiln, 'info', *args], capture_output=True, text=True, env=env, timeout=240)


def parsed(done):
    """The JSON report, or {} (a failed check) when stdout is not one."""
    try:
        return json.loads(done.stdout)
    except ValueError:
        check(False, 'info --json prints JSON', done.stdout[:300] + done.stderr[:300])
        return {}


def test_bad_arch(kiln, env):
    env = {**env, 'KILN_ARCH': 'garbage', 'KILN_Q_ONE_GROUP': '0'}
    done = info(kiln, env)
    check(done.returncode == 1, f'a bad KILN_ARCH: exit 1 (got {done.returncode})', done.stderr)
    for part in ('NVRTC ', 'driver:', 'disk cache:', 'levers:', 'KILN_ARCH=garbage', 'KILN_Q_ONE_GROUP=0 KILN_PDL=0',
                 'embedded modules:'):
        check(part in done.stdout, f'info still reports {part!r}', done.stdout)
    check("KILN_ARCH: invalid 'garbage'" in done.stderr and 'sm_XY[a]' in done.stderr and '90' in done.stderr,
          'the bad setting is named with what is expected and the archs NVRTC supports', done.stderr)

    done = info(kiln, env, '--json')
    check(done.returncode == 1, f'a bad KILN_ARCH with --json: exit 1 (got {done.returncode})', done.stderr)
    report = parsed(done)
    nvrtc = report.get('nvrtc', {})
    check(nvrtc.get('version', 'none') != 'none' and nvrtc.get('archs'), 'JSON reports NVRTC', nvrtc)
    check('driver' in report and 'disk_cache' in report and 'counters' in report, 'JSON reports the rest')
    check(report.get('default_target', '') is None, f"no default target ({report.get('default_target')})")
    check(report.get('levers', {}).get('KILN_ARCH') == 'garbage', f"the lever shows the value ({report.get('levers')})")
    check(report.get('levers', {}).get('KILN_Q_ONE_GROUP') is False, f"the pick's lever shows off ({report.get('levers')})")
    problems = report.get('problems', [])
    check(len(problems) == 1 and problems[0].startswith("KILN_ARCH: invalid 'garbage'"), 'JSON lists the problem',
          problems)


def test_good_settings(kiln, env):
    done = info(kiln, {**env, 'KILN_ARCH': 'sm_90a'}, '--json')
    check(done.returncode == 0, f'good settings: exit 0 (got {done.returncode})', done.stderr)
    report = parsed(done)
    check(report.get('problems') == [] and report.get('default_target') == 'sm_90a', 'no problem, target sm_90a',
          json.dumps(report)[:600])


def test_one_warning_each(kiln, env, tmp):
    blocker = tmp / 'not-a-folder'
    blocker.write_text('')
    # KILN_JIT is read on every use, twice by info; its warning used to be printed twice.
    env = {**env, 'KILN_CACHE_DIR': str(blocker), 'KILN_CACHE_MAX_BYTES': 'lots', 'KILN_JIT': 'maybe',
           'KILN_LINEINFO': 'maybe'}
    for args in ((), ('--json',)):
        done = info(kiln, env, *args)
        check(done.returncode == 0, f'info {args}: cache warnings are not errors (exit {done.returncode})', done.stderr)
        lines = done.stderr.splitlines()
        folder = [line for line in lines if 'disk cache not used' in line]
        size = [line for line in lines if 'KILN_CACHE_MAX_BYTES' in line]
        check(len(folder) == 1 and str(blocker) in folder[0], f'info {args}: one warning for the cache folder',
              done.stderr)
        check(len(size) == 1, f'info {args}: one warning for KILN_CACHE_MAX_BYTES', done.stderr)
        for lever in ('KILN_JIT', 'KILN_LINEINFO'):
            check(sum(f"{lever}='maybe'" in line for line in lines) == 1, f'info {args}: one warning for {lever}',
                  done.stderr)
        mode = parsed(done).get('disk_cache', {}).get('mode', '') if args else done.stdout
        check('memory-only' in mode, f'info {args} reports the cache as memory-only', done.stdout[-500:])


def main():
    kiln = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        env = {k: v for k, v in os.environ.items() if not k.startswith('KILN_')}
        env['KILN_CACHE_DIR'] = str(tmp / 'cache')
        test_bad_arch(kiln, env)
        test_good_settings(kiln, env)
        test_one_warning_each(kiln, env, tmp)
    return exit_status()


if __name__ == '__main__':
    sys.exit(main())
