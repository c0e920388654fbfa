#!/usr/bin/env python3
"""`kiln warm` across real processes on one cache folder, with the real compiler (no GPU needed):
8 processes started together compile each module exactly once in total; a new process hits the
disk for every module; a corrupted entry is healed (deleted, recompiled) and verifies afterwards;
`kiln info --json` reports the counters of what it resolved. A warm that keeps nothing (cache off,
folder unusable, every store failed) exits 1 and says why and which folder.

Usage: test_kiln_warm.py KILN_EXECUTABLE
"""
import json
import os
import pathlib
import subprocess
import sys
import tempfile
from checks import check, exit_status

def warm_all(kiln, env, count):
    procs = [subprocess.Popen([kiln, 'warm', '--arch', 'sm_90a', '--jobs', '2', '--json'], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(count)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=240)
        check(p.returncode == 0, f'warm exits 0 (stderr: {err.strip()[:300]})')
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def warm_fails(kiln, env, what, *words):
    """`kiln warm` exits 1, says why on stderr (every one of `words`), and keeps nothing."""
    for args in ((), ('--json',)):
        done = subprocess.run([kiln, 'warm', '--arch', 'sm_90a', '--jobs', '2', *args], env=env, capture_output=True,
                              text=True, timeout=240)
        check(done.returncode == 1, f'{what} {args}: warm exits 1 (got {done.returncode}; {done.stderr.strip()[:300]})')
        check(all(word in done.stderr for word in words), f'{what} {args}: stderr names {words} ({done.stderr.strip()[:400]})')
        if args:
            report = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else {}
            check(report.get('kept') == 0 and 'error' in report, f'{what}: JSON says nothing was kept ({report})')
        else:
            check('; cache \n' not in done.stdout, f'{what}: no empty folder in the summary ({done.stdout.strip()})')


def test_nothing_kept(kiln, tmp):
    base = {k: v for k, v in os.environ.items() if not k.startswith('KILN_')}
    blocker = tmp / 'not-a-folder'
    blocker.write_text('')
    warm_fails(kiln, {**base, 'KILN_CACHE': '0'}, 'KILN_CACHE=0', 'KILN_CACHE=0', 'nothing can be kept')
    warm_fails(kiln, {**base, 'KILN_CACHE_DIR': str(blocker)}, 'a regular file as the folder', str(blocker),
               'nothing can be kept')
    under = blocker / 'cache'
    warm_fails(kiln, {**base, 'KILN_CACHE_DIR': str(under)}, 'a folder under a regular file', str(under),
               'nothing can be kept')
    # Every entry is larger than a 1-byte bound: each store fails with a warning, nothing is kept.
    small = tmp / 'small'
    warm_fails(kiln, {**base, 'KILN_CACHE_DIR': str(small), 'KILN_CACHE_MAX_BYTES': '1'}, 'every store failed',
               str(small), '2 of 2 modules are not in the cache')


def main():
    kiln = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        cache = pathlib.Path(tmp) / 'cache'
        env = {**os.environ, 'KILN_CACHE_DIR': str(cache)}
        env.pop('KILN_CACHE', None)
        first = warm_all(kiln, env, 8)
        modules = first[0]['modules']
        check(modules == 2, f'sm_90a carries both quantizer modules (got {modules})')
        check(sum(r['compiles'] for r in first) == modules,
              f'8 processes compile each module once in total (compiles {[r["compiles"] for r in first]})')
        check(all(r['compiles'] + r['disk_hits'] == modules for r in first), 'every process got every module')
        check(all(r['compile_ms'] > 0 for r in first if r['compiles'] > 0),
              f'compile_ms counts the compiles ({[(r["compiles"], r["compile_ms"]) for r in first]})')
        check(all(r.get('kept') == modules for r in first), f'every process sees every module kept ({first[0]})')

        second = warm_all(kiln, env, 1)[0]
        check(second['compiles'] == 0 and second['disk_hits'] == modules,
              f'a new process hits the disk for every module ({second})')

        entries = sorted(cache.glob('*.kiln'))
        check(len(entries) == modules, f'one entry per module ({len(entries)})')
        data = bytearray(entries[0].read_bytes())
        data[len(data) // 2] ^= 0xFF
        entries[0].write_bytes(bytes(data))
        healed = warm_all(kiln, env, 1)[0]
        check(healed['corrupt_healed'] == 1 and healed['compiles'] == 1 and healed['disk_hits'] == modules - 1,
              f'a flipped byte is healed by one recompile ({healed})')
        verify = subprocess.run([kiln, 'cache', 'verify', '--json'], env=env, capture_output=True, text=True)
        check(verify.returncode == 0, f'every entry verifies afterwards ({verify.stdout.strip()[:300]})')

        # kiln info --json carries this process's counters: on a GPU it resolves the quantizer on
        # every device (disk hits now, the cache is warm); without one it loads nothing.
        info = json.loads(subprocess.run([kiln, 'info', '--json'], env=env, capture_output=True, text=True,
                                         check=True).stdout)
        counters = info['counters']
        wanted = {'memory_hits', 'disk_hits', 'compiles', 'compile_ms', 'corrupt_healed', 'lock_waits', 'evictions'}
        check(wanted <= counters.keys(), f'kiln info --json has the counters ({sorted(counters)})')
        resolved = [d for d in info['devices'] if d['fp8_act_quant'] is not None]
        check(counters['disk_hits'] + counters['compiles'] == sum(2 if d['fp8_act_quant']['twin'] else 1
                                                                  for d in resolved),
              f'info resolved the quantizer on {len(resolved)} device(s) through the caches ({counters})')
        test_nothing_kept(kiln, pathlib.Path(tmp))
    return exit_status()


if __name__ == '__main__':
    sys.exit(main())
