"""The README's Python example (examples/quickstart/quantize_fp8.py), run as it is on a GPU and
checked against the PyTorch reference of the same numerics."""
import pathlib
import runpy

import pytest

import torch_reference

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "quickstart" / "quantize_fp8.py"


@pytest.mark.gpu
def test_readme_example_runs_and_matches_the_reference():
    import torch
    done = runpy.run_path(str(EXAMPLE))
    x, q, scales = done["x"], done["q"], done["scales"]
    assert q.dtype == torch.float8_e4m3fn and q.shape == x.shape
    assert scales.dtype == torch.float32 and scales.shape == (4096, 56)
    q_ref, scales_ref = torch_reference.quantize(x, x.shape[1], 128, "e4m3")
    assert torch.equal(q.view(torch.uint8), q_ref)
    assert torch.equal(scales.view(torch.int32), scales_ref.view(torch.int32))
