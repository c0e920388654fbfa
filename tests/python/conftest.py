"""The installed kiln package (pip install .; tools/test-python): tests import what a user gets.
GPU tests are marked `gpu`. They skip, with the reason, only where there is no NVIDIA driver at all
(libcuda.so.1 does not load); where the driver loads but torch sees no CUDA device (a torch built
for another driver, a broken install) they fail, naming the problem."""
import ctypes

import pytest

gpu_problem = None  # set at collection: why the gpu tests must fail here, if they must
NO_DRIVER = "no NVIDIA driver: libcuda.so.1 does not load ({}) (GPU tests run on the H200: bench/device_python.sh)"


def driver_load_error():
    """Why libcuda.so.1 does not load, or None when it does. Why CDLL and not ctypes.util.find_library:
    find_library also finds the toolkit's link-time stub (stubs/libcuda.so), which is no driver."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError as error:
        return str(error)
    return None


def torch_device_problem():
    """Why torch sees no CUDA device, or None when it sees one."""
    import torch
    if torch.cuda.is_available():
        return None
    if torch.version.cuda is None:
        why = "this torch is built without CUDA"
    else:
        try:
            torch.cuda.init()
            why = f"torch.cuda.device_count() is {torch.cuda.device_count()}"
        except Exception as error:  # torch's own words for why CUDA is unusable
            why = f"{type(error).__name__}: {error}"
    return f"libcuda.so.1 loads (an NVIDIA driver is installed) but torch {torch.__version__} sees no CUDA device: {why}"


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items:
        return
    missing = driver_load_error()
    if missing is not None:
        skip = pytest.mark.skip(reason=NO_DRIVER.format(missing))
        for item in gpu_items:
            item.add_marker(skip)
        return
    global gpu_problem
    gpu_problem = torch_device_problem()


def pytest_runtest_setup(item):
    if gpu_problem is not None and "gpu" in item.keywords:
        pytest.fail(gpu_problem, pytrace=False)


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device (skipped only without an NVIDIA driver)")
