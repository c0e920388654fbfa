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
    _torch_ops = _fast = _Tensor = _compiling = _LaunchError = None
else:
    # Why at import: torch.compile must find torch.ops.kiln.* registered before it traces a call.
    from . import _dlpack, _torch_ops
    # The eager fast path (kiln._kiln_torch), read per call so a test can turn it off.
    _fast = _torch_ops.fast_quantize
    _Tensor = _torch.Tensor
    _compiling = _torch.compiler.is_compiling
    _LaunchError = _torch_ops._kiln_torch.LaunchError if _fast is not None else None


def _ops():
    if _torch_ops is None:
        raise ImportError("kiln: the quantizer ops need PyTorch (pip install torch)")
    return _torch_ops


def _public(name: str, output: str, int8: bool, doc: str):
    """One of the public quantizers. Why a factory: the two differ only in the output, and the body
    is the hot path: untraced, one call into kiln._kiln_torch does everything; under tracing, or
    where it declines, the op path in _torch_ops checks, raises or runs the op."""

    def quantize(x, group_size=128, eps=1e-10, column_major_scales=False, tma_aligned_scales=False, use_ue8m0=False,
                 out_q=None, *, dtype=None, pack_ue8m0_scales=False, fuse_silu_and_mul=False):
        # Why is_compiling first: under torch.compile it folds to True and dynamo never sees the
        # C++ call, which it could not trace.
        if _fast is not None and not _compiling() and type(x) is _Tensor:
            try:
                done = _fast(x, group_size, eps, column_major_scales, tma_aligned_scales, use_ue8m0, out_q, dtype,
                             pack_ue8m0_scales, fuse_silu_and_mul, int8)
            except _LaunchError as error:
                _torch_ops.fast_launch_failed(error, x, group_size, column_major_scales, tma_aligned_scales,
                                              use_ue8m0, pack_ue8m0_scales, fuse_silu_and_mul, output)
                raise
            if done is not None:
                return done
        ops = _ops()
        ops.check_dtype(dtype, output)
        return ops.quantize(_dlpack.as_tensor(x, "x"), group_size, eps, column_major_scales, tma_aligned_scales,
                            use_ue8m0, _dlpack.as_tensor(out_q, "out_q"), output, pack_ue8m0_scales,
                            fuse_silu_and_mul)

    quantize.__name__ = quantize.__qualname__ = name
    quantize.__doc__ = doc
    return quantize


per_token_group_quant_fp8 = _public("per_token_group_quant_fp8", "e4m3", False, """\
    vLLM's per_token_group_quant_fp8: x [..., K] (bfloat16, float16 or float32, CUDA, last
    dimension contiguous, K a multiple of group_size in 32, 64, 128) -> (q float8_e4m3fn [..., K],
    scales float32). Scales: row-major [..., K/group_size]; column_major_scales: a (M, G) view of
    (G, M) storage; with tma_aligned_scales M is padded to a multiple of 4; use_ue8m0 rounds scales
    up to powers of two; pack_ue8m0_scales (with the three flags) gives DeepGEMM's int32 layout of
    four exponents each. fuse_silu_and_mul: x is [..., 2K] = [gate, up] and silu(gate) * up is
    quantized (SGLang's fused MoE activation). out_q: write q there (returned as q). Runs on x's
    device and PyTorch's current stream.""")
per_token_group_quant_int8 = _public("per_token_group_quant_int8", "int8", True, """\
    vLLM's per_token_group_quant_int8: as per_token_group_quant_fp8 with q int8 (+-127).""")


def warm(device=None, dtype=None, group_size=128, output="e4m3", scales="row_major", use_ue8m0=False,
         fuse_silu_and_mul=False):
    """Load a quantizer variant on `device` (default: the current CUDA device) now, from the disk
    cache or by compiling, so that its first use, e.g. inside a CUDA graph capture, loads nothing.
    dtype: x's dtype (default torch.bfloat16); output: 'e4m3' or 'int8'; scales: 'row_major',
    'column_major', 'column_major_tma' or 'ue8m0_packed'. Returns whether every kernel a call of the
    variant can launch is there (the default variant: the seed's two and the family module that takes
    another eps or strided rows)."""
    ops = _ops()
    return ops.warm(device, _torch.bfloat16 if dtype is None else dtype, group_size, output, scales, use_ue8m0,
                    fuse_silu_and_mul)


__all__ = ["per_token_group_quant_fp8", "per_token_group_quant_int8", "warm", "info", "devices", "cache_stats",
           "__version__"]
