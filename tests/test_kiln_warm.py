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


def warm_report(kiln, env, *extra, cwd=None):
    done = subprocess.run([kiln, 'warm', '--arch', 'sm_90a', '--json', *extra], env=env, capture_output=True,
                          text=True, timeout=240, cwd=cwd)
    lines = done.stdout.strip().splitlines()
    return done, (json.loads(lines[-1]) if lines else {})


def test_bundle_layers(kiln, tmp):
    """warm searches every layer of KILN_CACHE_PATH: what a bundle holds is counted as a layer hit
    and never compiled, with KILN_JIT=off and with it on (workers included)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith('KILN_')}
    bundle = tmp / 'layers.kpack'
    packed = subprocess.run([kiln, 'pack', '--arch', 'sm_90a', '-o', str(bundle), '--jobs', '1'],
                            env={**base, 'KILN_CACHE_DIR': str(tmp / 'pack-cache')}, capture_output=True, text=True,
                            timeout=240)
    check(packed.returncode == 0, 'a bundle of sm_90a for the layer checks', packed.stderr[-300:])
    for jit, jobs in (('off', '1'), ('on', '2')):
        folder = tmp / f'layers-{jit}'
        env = {**base, 'KILN_CACHE_PATH': f'{bundle}:{folder}', 'KILN_JIT': jit}
        done, report = warm_report(kiln, env, '--jobs', jobs)
        what = f'KILN_JIT={jit} --jobs {jobs}'
        check(done.returncode == 0, f'{what}: warm over bundle:folder exits 0', done.stderr[-400:])
        check('in no cache layer' not in done.stderr, f'{what}: the bundle is searched', done.stderr[-400:])
        check(report.get('layer_hits') == 2 and report.get('compiles') == 0,
              f'{what}: both modules counted as layer hits, none compiled ({report})')
        check(not list(folder.glob('*.kiln')), f'{what}: nothing compiled into the folder')
        text = subprocess.run([kiln, 'warm', '--arch', 'sm_90a', '--jobs', jobs], env=env, capture_output=True,
                              text=True, timeout=240)
        check(text.returncode == 0 and '2 from read-only layers' in text.stdout and '0 compiled' in text.stdout,
              f'{what}: the summary line says where they came from', text.stdout + text.stderr[-300:])


def test_one_warning_per_tree(kiln, tmp):
    """A warning about the environment is printed once by the whole process tree, however many
    `kiln worker` processes warm starts."""
    base = {k: v for k, v in os.environ.items() if not k.startswith('KILN_')}
    env = {**base, 'KILN_CACHE_DIR': str(tmp / 'warn-cache')}
    for extra, words in (({'KILN_LINEINFO': 'x'}, "KILN_LINEINFO='x'"),
                         ({'KILN_REMOTE_CACHE': 'bogus://x'}, 'bogus://x')):
        # Cold and then warm: workers start either way with two modules and --jobs 2.
        for round in ('cold', 'warm'):
            done = subprocess.run([kiln, 'warm', '--arch', 'sm_90a', '--jobs', '2'], env={**env, **extra},
                                  capture_output=True, text=True, timeout=240)
            # Why warning lines only: a command may end with its own failure line naming the reason.
            count = sum(1 for line in done.stderr.splitlines() if '[warning]' in line and words in line)
            # Why not the exit status for the URL: a requested remote tier that is off may be a failure.
            check(count == 1 and (done.returncode == 0 or 'KILN_REMOTE_CACHE' in extra),
                  f'{words} ({round}): one warning for the process tree (got {count}, exit {done.returncode})',
                  done.stderr[-600:])


def test_relative_cache_dir(kiln, tmp):
    """A relative KILN_CACHE_DIR is taken from the working directory and shown absolute."""
    base = {k: v for k, v in os.environ.items() if not k.startswith('KILN_')}
    env = {**base, 'KILN_CACHE_DIR': 'relative-cache'}
    done, report = warm_report(kiln, env, '--jobs', '1', cwd=tmp)
    absolute = str(tmp / 'relative-cache')
    check(done.returncode == 0 and report.get('cache', {}).get('dir') == absolute,
          f'warm: the folder is shown absolute ({report.get("cache")})', done.stderr[-300:])
    stats = subprocess.run([kiln, 'cache', 'stats', '--json'], env=env, capture_output=True, text=True, cwd=tmp)
    shown = json.loads(stats.stdout).get('dir') if stats.returncode == 0 else None
    check(shown == absolute, f'cache stats: the folder is shown absolute ({shown})', stats.stderr[-300:])
    info = subprocess.run([kiln, 'info', '--json'], env=env, capture_output=True, text=True, cwd=tmp)
    shown = json.loads(info.stdout).get('disk_cache', {}).get('dir') if info.stdout.strip() else None
    check(shown == absolute, f'info: the folder is shown absolute ({shown})', info.stderr[-300:])


def main():
    kiln = os.path.abspath(sys.argv[1])
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
        test_bundle_layers(kiln, pathlib.Path(tmp))
        test_one_warning_per_tree(kiln, pathlib.Path(tmp))
        test_relative_cache_dir(kiln, pathlib.Path(tmp))
    return exit_status()


if __name__ == '__main__':
    sys.exit(main())
