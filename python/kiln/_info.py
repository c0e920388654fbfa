"""kiln.info(), kiln.devices(), kiln.cache_stats(): the kiln program's JSON as Python data, so the
package and the command line never disagree."""

import json
import os
import subprocess
import sys
from typing import List

from . import _kiln

PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kiln")


def run_json(*args: str) -> dict:
    """`kiln ARGS --json` parsed. A run that printed no JSON raises RuntimeError with its stderr."""
    done = subprocess.run([PROGRAM, *args, "--json"], capture_output=True, text=True)
    try:
        return json.loads(done.stdout)
    except json.JSONDecodeError:
        raise RuntimeError(f"kiln {' '.join(args)} --json exited {done.returncode} without JSON: "
                           f"{done.stderr.strip() or done.stdout.strip()}") from None


def info() -> dict:
    """What `kiln info --json` says: NVRTC, driver, devices and targets, disk cache, levers, and
    `problems` (a bad KILN_ARCH), as plain data."""
    return run_json("info")


def devices() -> List[dict]:
    """One dict per GPU: ordinal, name, compute_capability, sm_count, target, target_reason, ..."""
    return info()["devices"]


def cache_stats() -> dict:
    """`disk`: the disk cache folder (`kiln cache stats --json`: entries and bytes per target);
    `process`: this process's counters per device the package has used, keyed by device ordinal:
    `memory`, `disk` and `remote` (the Redis tier), each a dict of counts (hits, compiles, ...)."""
    return {"disk": run_json("cache", "stats"),
            "process": {device: _kiln.counters(device) for device in _kiln.used_devices()}}


def main(argv=None) -> None:
    """`python -m kiln ...` and the `kiln` script: the kiln program itself, same arguments, same
    exit status."""
    args = sys.argv[1:] if argv is None else argv
    try:
        os.execv(PROGRAM, [PROGRAM, *args])
    except OSError as error:
        sys.stderr.write(f"kiln: cannot run {PROGRAM}: {error}\n")
        sys.exit(1)
