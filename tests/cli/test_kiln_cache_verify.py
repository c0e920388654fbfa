"""`kiln cache verify` in a process whose KILN_CACHE_MAX_BYTES is smaller than the entries: they are
listed as not checked, never as bad, the exit status is 0, and the files stay for processes with a
larger bound. On an unusable folder it says it checked nothing and why, exit 1."""
import json
import os
import subprocess

import pytest


def run(kiln, args, env):
    return subprocess.run([kiln, *args], env=env, capture_output=True, text=True, timeout=240)


def entries_in(folder):
    return sorted(f for f in os.listdir(folder) if f.endswith('.kiln'))


def test_entries_above_the_bound_are_not_checked(kiln, tmp_path):
    env = dict(os.environ, KILN_CACHE_DIR=str(tmp_path), KILN_ARCH='sm_90a')
    warm = run(kiln, ['warm', '--arch', 'sm_90a', '--jobs', '1'], env)
    assert warm.returncode == 0, warm.stdout + warm.stderr
    entries = entries_in(tmp_path)
    assert len(entries) == 2, entries
    small = dict(env, KILN_CACHE_MAX_BYTES='1')
    verify = run(kiln, ['cache', 'verify', '--json'], small)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    report = json.loads(verify.stdout)
    assert report['bad'] == [], report
    assert sorted(os.path.basename(e['file']) for e in report['skipped']) == entries, report
    text = run(kiln, ['cache', 'verify'], small)
    assert text.returncode == 0 and '0 bad, 2 not checked' in text.stdout, text.stdout + text.stderr
    assert entries_in(tmp_path) == entries, 'the entries stay'
    full = json.loads(run(kiln, ['cache', 'verify', '--json'], env).stdout)
    assert full['good'] == 2 and full['skipped'] == [], full


@pytest.mark.parametrize('setting', ['blocker', 'off'], ids=['folder is a file', 'KILN_CACHE=0'])
def test_unusable_folder(kiln, clean_env, tmp_path, setting):
    blocker = tmp_path / 'a-file'
    blocker.write_text('')
    env, why = ({**clean_env, 'KILN_CACHE_DIR': str(blocker)}, str(blocker)) if setting == 'blocker' else \
        ({**clean_env, 'KILN_CACHE': '0'}, 'KILN_CACHE=0')
    text = run(kiln, ['cache', 'verify'], env)
    assert text.returncode == 1, (text.returncode, text.stdout, text.stderr)
    assert 'checked nothing' in text.stderr and why in text.stderr, text.stdout + text.stderr
    assert 'good' not in text.stdout, text.stdout
    report = run(kiln, ['cache', 'verify', '--json'], env)
    assert report.returncode == 1, report.stdout + report.stderr
    out = json.loads(report.stdout)
    assert out.get('checked') is False and 'checked nothing' in out.get('error', ''), out
