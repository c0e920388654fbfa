"""What the remote-cache command-line tests share: a clean environment for one "node" (its own
cache folder, KILN_* from the caller only), `kiln warm --json` and `kiln cache verify --json` on it."""
import json
import os
import subprocess
import time


def node_env(folder, **kiln_vars):
    env = {k: v for k, v in os.environ.items() if not k.startswith('KILN_')}
    env['KILN_CACHE_DIR'] = str(folder)
    env.update({k: str(v) for k, v in kiln_vars.items()})
    return env


def warm(kiln, env, arch='sm_90a', jobs=2):
    """Runs `kiln warm --json`; returns (exit status, report or {}, stderr, seconds)."""
    start = time.monotonic()
    done = subprocess.run([kiln, 'warm', '--arch', arch, '--jobs', str(jobs), '--json'], env=env,
                          capture_output=True, text=True, timeout=240)
    seconds = time.monotonic() - start
    lines = done.stdout.strip().splitlines()
    return done.returncode, (json.loads(lines[-1]) if lines else {}), done.stderr, seconds


def verify(kiln, env):
    """`kiln cache verify --json` on the node: (good, bad)."""
    done = subprocess.run([kiln, 'cache', 'verify', '--json'], env=env, capture_output=True, text=True, timeout=60)
    report = json.loads(done.stdout)
    return report['good'], report['bad']


def module_count(kiln, arch):
    """How many modules `kiln warm --arch ARCH` handles (from a warm with the cache off)."""
    done = subprocess.run([kiln, 'warm', '--arch', arch, '--json'], env=node_env('/nonexistent', KILN_CACHE='0'),
                          capture_output=True, text=True, timeout=60)
    return json.loads(done.stdout.strip().splitlines()[-1])['modules']
