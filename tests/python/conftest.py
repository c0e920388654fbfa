"""The installed kiln package (pip install .; tools/test-python): tests import what a user gets.
GPU tests are marked `gpu` and skip, with the reason, on a machine without a CUDA device."""
import pytest


def pytest_collection_modifyitems(config, items):
    import torch
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="no CUDA device (GPU tests run on the H200: bench/device_python.sh)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device")
