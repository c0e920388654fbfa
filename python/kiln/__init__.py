"""kiln for Python: the JIT kernel service's per-token-group quantizers as PyTorch ops
(torch.ops.kiln.*, traceable by torch.compile, capturable in CUDA graphs), DLPack for other
arrays, and kiln's diagnostics as plain data.

    q, scales = kiln.per_token_group_quant_fp8(x, group_size=128)

PyTorch is needed for the ops only; `kiln.info()` and `python -m kiln` work without it."""

from . import _kiln
from ._info import cache_stats, devices, info

__version__ = _kiln.version()

try:
    import torch as _torch  # noqa: F401
except ImportError:  # the ops say so when called
    _torch_ops = None
else:
    # Why at import: torch.compile must find torch.ops.kiln.* registered before it traces a call.
    from . import _dlpack, _torch_ops


def _ops():
    if _torch_ops is None:
        raise ImportError("kiln: the quantizer ops need PyTorch (pip install torch)")
    return _torch_ops


def per_token_group_quant_fp8(x, group_size=128, eps=1e-10, column_major_scales=False, tma_aligned_scales=False,
                              use_ue8m0=False, out_q=None, *, dtype=None, pack_ue8m0_scales=False,
                              fuse_silu_and_mul=False):
    """vLLM's per_token_group_quant_fp8: x [..., K] (bfloat16, float16 or float32, CUDA, last
    dimension contiguous, K a multiple of group_size in 32, 64, 128) -> (q float8_e4m3fn [..., K],
    scales float32). Scales: row-major [..., K/group_size]; column_major_scales: a (M, G) view of
    (G, M) storage; with tma_aligned_scales M is padded to a multiple of 4; use_ue8m0 rounds scales
    up to powers of two; pack_ue8m0_scales (with the three flags) gives DeepGEMM's int32 layout of
    four exponents each. fuse_silu_and_mul: x is [..., 2K] = [gate, up] and silu(gate) * up is
    quantized (SGLang's fused MoE activation). out_q: write q there (returned as q). Runs on x's
    device and PyTorch's current stream."""
    ops = _ops()
    ops.check_dtype(dtype, "e4m3")
    return ops.quantize(_dlpack.as_tensor(x, "x"), group_size, eps, column_major_scales, tma_aligned_scales,
                        use_ue8m0, _dlpack.as_tensor(out_q, "out_q"), "e4m3", pack_ue8m0_scales, fuse_silu_and_mul)


def per_token_group_quant_int8(x, group_size=128, eps=1e-10, column_major_scales=False, tma_aligned_scales=False,
                               use_ue8m0=False, out_q=None, *, dtype=None, pack_ue8m0_scales=False,
                               fuse_silu_and_mul=False):
    """vLLM's per_token_group_quant_int8: as per_token_group_quant_fp8 with q int8 (+-127)."""
    ops = _ops()
    ops.check_dtype(dtype, "int8")
    return ops.quantize(_dlpack.as_tensor(x, "x"), group_size, eps, column_major_scales, tma_aligned_scales,
                        use_ue8m0, _dlpack.as_tensor(out_q, "out_q"), "int8", pack_ue8m0_scales, fuse_silu_and_mul)


def warm(device=None, dtype=None, group_size=128, output="e4m3", scales="row_major", use_ue8m0=False,
         fuse_silu_and_mul=False):
    """Load a quantizer variant on `device` (default: the current CUDA device) now, from the disk
    cache or by compiling, so that its first use, e.g. inside a CUDA graph capture, loads nothing.
    dtype: x's dtype (default torch.bfloat16); output: 'e4m3' or 'int8'; scales: 'row_major',
    'column_major', 'column_major_tma' or 'ue8m0_packed'. Returns whether a kernel is there."""
    ops = _ops()
    return ops.warm(device, _torch.bfloat16 if dtype is None else dtype, group_size, output, scales, use_ue8m0,
                    fuse_silu_and_mul)


__all__ = ["per_token_group_quant_fp8", "per_token_group_quant_int8", "warm", "info", "devices", "cache_stats",
           "__version__"]
