"""conftest.py's rule for `gpu` tests, on its own copy in a scratch folder, run by a pytest whose view of
the driver and of torch's device is set here: no libcuda.so.1 -> skipped, saying so; libcuda.so.1 but
no device for torch -> failed, naming both; both -> run. Tests without the mark run in every case.
Then the same conftest on this machine, unpatched."""
import ctypes
import pathlib
import subprocess
import sys
import xml.etree.ElementTree as ElementTree


HERE = pathlib.Path(__file__).parent

# Why a separate process: the patches (ctypes.CDLL for libcuda.so.1, torch.cuda.is_available) must
# not leak into this session, and conftest hooks run only in a session of their own.
RUNNER = """
import ctypes, sys
import torch, pytest
mode = sys.argv[1]
if mode != "real":
    driver, device = mode.split(",")
    real_cdll = ctypes.CDLL
    def cdll(name, *args, **kwargs):
        if name != "libcuda.so.1":
            return real_cdll(name, *args, **kwargs)
        if driver == "no-driver":
            raise OSError("libcuda.so.1: cannot open shared object file: No such file or directory")
        return object()
    ctypes.CDLL = cdll
    torch.cuda.is_available = lambda: device == "device"
sys.exit(pytest.main(sys.argv[2:]))
"""

TESTS = """import pytest

@pytest.mark.gpu
def test_on_the_gpu():
    pass

def test_on_the_cpu():
    pass
"""


def outcomes(tmp_path, mode):
    folder = tmp_path / mode.replace(",", "-")
    folder.mkdir()
    (folder / "conftest.py").write_text((HERE / "conftest.py").read_text())
    (folder / "test_marked.py").write_text(TESTS)
    report = folder / "report.xml"
    done = subprocess.run([sys.executable, "-c", RUNNER, mode, str(folder), "-p", "no:cacheprovider", "-q",
                           f"--junitxml={report}"], cwd=folder, capture_output=True, text=True, timeout=240)
    assert report.exists(), done.stdout + done.stderr
    found = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        verdict = ("passed", "")
        for child in case:
            if child.tag in ("skipped", "error", "failure"):
                verdict = (child.tag, child.get("message", ""))
        found[case.get("name")] = verdict
    return done.returncode, found, done.stdout + done.stderr


def test_no_driver_skips(tmp_path):
    status, found, out = outcomes(tmp_path, "no-driver,no-device")
    assert status == 0, out
    verdict, message = found["test_on_the_gpu"]
    assert verdict == "skipped" and "no NVIDIA driver" in message and "libcuda.so.1" in message, found
    assert found["test_on_the_cpu"][0] == "passed", found


def test_driver_without_device_fails(tmp_path):
    status, found, out = outcomes(tmp_path, "driver,no-device")
    assert status == 1, out
    verdict, message = found["test_on_the_gpu"]
    assert verdict == "error", found
    assert "libcuda.so.1 loads" in message and "sees no CUDA device" in message, message
    assert found["test_on_the_cpu"][0] == "passed", found


def test_driver_and_device_run(tmp_path):
    status, found, out = outcomes(tmp_path, "driver,device")
    assert status == 0, out
    assert found == {"test_on_the_gpu": ("passed", ""), "test_on_the_cpu": ("passed", "")}, found


def test_this_machine(tmp_path):
    """The CPU machine has the toolkit's stub libcuda.so but no libcuda.so.1: its gpu tests skip."""
    import torch
    try:
        ctypes.CDLL("libcuda.so.1")
        expected = "passed" if torch.cuda.is_available() else "error"
    except OSError:
        expected = "skipped"
    _, found, out = outcomes(tmp_path, "real")
    assert found["test_on_the_gpu"][0] == expected, out
