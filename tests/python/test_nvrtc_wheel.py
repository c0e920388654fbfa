"""`pip install kiln[nvrtc]` on a machine without the CUDA toolkit: the kiln wheel that
tools/test-python built (KILN_TEST_WHEEL) goes into a fresh virtual environment (no torch), and its
`kiln` program runs with the toolkit hidden (an empty tmpfs over it, in a user and mount namespace
of its own), LD_LIBRARY_PATH and KILN_* unset. Without the nvidia-cuda-nvrtc wheel `kiln info`
finds no NVRTC; with the `nvrtc` extra it finds the wheel's NVRTC beside itself, and `kiln dump`
compiles with it. Also: the wheel's version is meson.build's. Needs PyPI (nvidia-cuda-nvrtc) and
`unshare`; it fails, never skips, without them."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

MODULE = "per_token_group_quant_fp8"
MESON_BUILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "meson.build")


def run(argv, **kwargs):
    done = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip() or done.stdout.strip()}"
    return done


class FreshVenv:
    """A new virtual environment with the kiln wheel, and its `kiln` script run with or without the
    toolkit."""

    def __init__(self, folder, wheel):
        self.folder = folder
        self.wheel = wheel
        run([sys.executable, "-m", "venv", os.path.join(folder, "venv")])
        self.python = os.path.join(folder, "venv", "bin", "python")
        self.kiln = os.path.join(folder, "venv", "bin", "kiln")
        self.site = run([self.python, "-c", "import sysconfig; print(sysconfig.get_path('platlib'))"]).stdout.strip()
        # Why no KILN_*, LD_LIBRARY_PATH, VIRTUAL_ENV: each is a way to NVRTC other than the wheel.
        self.env = {key: value for key, value in os.environ.items()
                    if not key.startswith("KILN_")
                    and key not in ("LD_LIBRARY_PATH", "VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONPATH")}
        self.env["KILN_CACHE_DIR"] = os.path.join(folder, "cache")

    def pip_install(self, requirement):
        run([self.python, "-m", "pip", "install", "-q", "--no-cache-dir", "--disable-pip-version-check", requirement])

    def kiln_run(self, args, hide=None):
        """`kiln ARGS` from the venv's script; `hide`: a folder covered by an empty tmpfs meanwhile."""
        argv = [self.kiln, *args]
        if hide is not None:
            argv = ["unshare", "--user", "--map-root-user", "--mount",
                    "sh", "-c", 'mount -t tmpfs kiln-hidden "$0" && exec "$@"', hide, *argv]
        return subprocess.run(argv, capture_output=True, text=True, env=self.env, cwd=self.folder)

    def nvrtc_found(self, hide=None):
        done = self.kiln_run(["info", "--json"], hide)
        try:
            return json.loads(done.stdout)["nvrtc_found"]
        except json.JSONDecodeError:
            pytest.fail(f"kiln info --json printed no JSON (exit {done.returncode}): {done.stderr.strip()}")


@pytest.fixture
def venv():
    wheel = os.environ.get("KILN_TEST_WHEEL")
    if not wheel or not os.path.isfile(wheel):
        pytest.fail(f"KILN_TEST_WHEEL={wheel!r} is not the kiln wheel: run this test through tools/test-python")
    if shutil.which("unshare") is None:
        pytest.fail("unshare (util-linux) is not installed: the toolkit cannot be hidden")
    folder = tempfile.mkdtemp(prefix="kiln-nvrtc-wheel.")
    try:
        yield FreshVenv(folder, wheel)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_nvrtc_extra_gives_the_kiln_program_nvrtc_without_the_toolkit(venv):
    venv.pip_install(venv.wheel)
    # The version is written once, in meson.build; the wheel's metadata and the program both carry it.
    with open(MESON_BUILD) as meson_build:
        written = re.search(r"project\('kiln'.*?version: '([^']+)'", meson_build.read(), re.S).group(1)
    metadata = run([venv.python, "-c", "import importlib.metadata as m; print(m.version('kiln'))"]).stdout.strip()
    assert metadata == written
    assert venv.kiln_run(["--version"]).stdout.strip() == written
    shown = venv.nvrtc_found()
    assert shown["found"] and shown["source"] == "toolkit", \
        f"the test hides the toolkit the wheel was built against, but kiln does not find NVRTC there: {shown}"
    toolkit = os.path.dirname(os.path.dirname(os.path.realpath(shown["path"])))

    probe = venv.kiln_run(["--version"], hide=toolkit)
    assert probe.returncode == 0, f"cannot hide {toolkit} (unshare --user --mount): {probe.stderr.strip()}"
    hidden = venv.nvrtc_found(hide=toolkit)
    wheel_folder = os.path.join(os.path.realpath(venv.site), "nvidia", "cu13", "lib")
    assert not hidden["found"], f"NVRTC found with the toolkit hidden and no nvidia-cuda-nvrtc: {hidden}"
    assert wheel_folder in hidden["meaning"], hidden["meaning"]

    venv.pip_install(venv.wheel + "[nvrtc]")
    hidden = venv.nvrtc_found(hide=toolkit)
    assert hidden["found"] and hidden["loaded"], hidden
    assert hidden["source"] == "python wheel"
    assert hidden["path"] == os.path.join(wheel_folder, "libnvrtc.so.13")
    assert hidden["build"].startswith("build-id ")

    out = os.path.join(venv.folder, "dump")
    dump = venv.kiln_run(["dump", "--arch", "sm_90a", "--module", MODULE, "--out", out], hide=toolkit)
    assert dump.returncode == 0, f"kiln dump exited {dump.returncode}: {dump.stderr.strip() or dump.stdout.strip()}"
    for suffix in ("ptx", "cubin"):
        written = os.path.join(out, f"{MODULE}.sm_90a.{suffix}")
        assert os.path.isfile(written) and os.path.getsize(written) > 0, f"kiln dump wrote no .{suffix}: {os.listdir(out)}"
