"""`kiln cache verify` in a process whose KILN_CACHE_MAX_BYTES is smaller than the entries: they are
listed as not checked, never as bad, the exit status is 0, and the files stay for processes with a
larger bound.

Usage: test_kiln_cache_verify.py KILN
"""
import json
import os
import subprocess
import sys
import tempfile


def run(kiln, args, env):
    return subprocess.run([kiln, *args], env=env, capture_output=True, text=True, timeout=240)


def main():
    kiln = sys.argv[1]
    with tempfile.TemporaryDirectory() as folder:
        env = dict(os.environ, KILN_CACHE_DIR=folder, KILN_ARCH='sm_90a')
        warm = run(kiln, ['warm', '--arch', 'sm_90a', '--jobs', '1'], env)
        assert warm.returncode == 0, warm.stdout + warm.stderr
        entries = sorted(f for f in os.listdir(folder) if f.endswith('.kiln'))
        assert len(entries) == 2, entries
        small = dict(env, KILN_CACHE_MAX_BYTES='1')
        verify = run(kiln, ['cache', 'verify', '--json'], small)
        assert verify.returncode == 0, verify.stdout + verify.stderr
        report = json.loads(verify.stdout)
        assert report['bad'] == [], report
        assert sorted(os.path.basename(e['file']) for e in report['skipped']) == entries, report
        text = run(kiln, ['cache', 'verify'], small)
        assert text.returncode == 0 and '0 bad, 2 not checked' in text.stdout, text.stdout + text.stderr
        assert sorted(f for f in os.listdir(folder) if f.endswith('.kiln')) == entries
        full = json.loads(run(kiln, ['cache', 'verify', '--json'], env).stdout)
        assert full['good'] == 2 and full['skipped'] == [], full
    print('ok: entries above the bound are not checked, not bad, and kept')
    unusable_folder(kiln)
    print('ok: verify on an unusable folder says it checked nothing and why, exit 1')


def unusable_folder(kiln):
    with tempfile.TemporaryDirectory() as tmp:
        blocker = os.path.join(tmp, 'a-file')
        open(blocker, 'w').close()
        base = {k: v for k, v in os.environ.items() if not k.startswith('KILN_')}
        for env, why in ((dict(base, KILN_CACHE_DIR=blocker), blocker), (dict(base, KILN_CACHE='0'), 'KILN_CACHE=0')):
            text = run(kiln, ['cache', 'verify'], env)
            assert text.returncode == 1, (text.returncode, text.stdout, text.stderr)
            assert 'checked nothing' in text.stderr and why in text.stderr, text.stdout + text.stderr
            assert 'good' not in text.stdout, text.stdout
            report = run(kiln, ['cache', 'verify', '--json'], env)
            assert report.returncode == 1, report.stdout + report.stderr
            out = json.loads(report.stdout)
            assert out.get('checked') is False and 'checked nothing' in out.get('error', ''), out


if __name__ == '__main__':
    main()
