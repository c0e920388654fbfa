"""`kiln warm` into a folder nothing can be written to (/proc) fails and says why, instead of
"compiling" into it and exiting 0 while every store fails. As root the folder passes every
permission check; only the writability probe (create and remove a file) refuses it."""
import os
import subprocess

import pytest


@pytest.fixture(scope='module')
def warm_into_proc(kiln):
    env = dict(os.environ, KILN_CACHE_DIR='/proc', KILN_LOG_LEVEL='warn')
    done = subprocess.run([kiln, 'warm', '--arch', 'sm_90a', '--jobs', '1'], env=env, capture_output=True,
                          text=True, timeout=240)
    return done.returncode, done.stdout + done.stderr


def test_fails_and_says_why(warm_into_proc):
    status, out = warm_into_proc
    assert status != 0, f'kiln warm into /proc exited 0\n{out}'
    assert "'/proc'" in out and 'memory' in out, f'kiln warm does not say that /proc cannot hold the cache\n{out}'


def test_root_is_refused_by_the_probe(warm_into_proc):
    if os.geteuid() != 0:
        pytest.skip('as another user than root, a permission check refuses /proc before the probe')
    _, out = warm_into_proc
    assert 'cannot create a file in it' in out, f'as root, the reason should be the failed probe\n{out}'
