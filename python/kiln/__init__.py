"""kiln for Python: the JIT kernel service's per-token-group quantizers as PyTorch ops
(torch.ops.kiln.*, traceable by torch.compile, capturable in CUDA graphs), DLPack for other
arrays, and kiln's diagnostics as plain data.

    q, scales = kiln.per_token_group_quant_fp8(x, group_size=128)

PyTorch is needed for the ops only; `kiln.info()` and `python -m kiln` work without it."""

from . import _kiln
from ._info import cache_stats, devices, info

__version__ = _kiln.version()

try:
    import torch as _torch
except ImportError:  # the ops say so when called
    _torch_ops = None
else:
    # Why at import: torch.compile must find torch.ops.kiln.* registered before it traces a call.
    from . import _torch_ops


def _ops():
    if _torch_ops is None:
        raise ImportError("kiln: the quantizer ops need PyTorch (pip install torch)")
    return _torch_ops


def _public(name: str, output: str, doc: str):
    if _torch_ops is not None:
        return _torch_ops.public(name, output, doc)

    def quantize(*args, **kwargs):
        _ops()

    quantize.__name__ = quantize.__qualname__ = name
    quantize.__doc__ = doc
    return quantize


per_token_group_quant_fp8 = _public("per_token_group_quant_fp8", "e4m3", """\
    vLLM's per_token_group_quant_fp8: x [..., K] (bfloat16, float16 or float32, CUDA, last
    dimension contiguous, K a multiple of group_size in 32, 64, 128) -> (q float8_e4m3fn [..., K],
    scales float32). Scales: row-major [..., K/group_size]; column_major_scales: a (M, G) view of
    (G, M) storage; with tma_aligned_scales M is padded to a multiple of 4; use_ue8m0 rounds scales
    up to powers of two; pack_ue8m0_scales (with the three flags) gives DeepGEMM's int32 layout of
    four exponents each. fuse_silu_and_mul: x is [..., 2K] = [gate, up] and silu(gate) * up is
    quantized (SGLang's fused MoE activation). out_q: write q there (returned as q). Runs on x's
    device and PyTorch's current stream.

    batched (default: whether masked_m is given): x is a batch of experts [E, T, K] (MoE), q
    [E, T, K] and the scales one block per expert, [E, T, G] (or [E, T, ceil(G/4)] packed) in the
    layout above. masked_m: int32 [E] on x's device, read by the kernel: expert e's rows from
    masked_m[e] on are left untouched in q and the scales.""")
per_token_group_quant_int8 = _public("per_token_group_quant_int8", "int8", """\
    vLLM's per_token_group_quant_int8: as per_token_group_quant_fp8 with q int8 (+-127).""")


def warm(device=None, dtype=None, group_size=128, output="e4m3", scales="row_major", use_ue8m0=False,
         fuse_silu_and_mul=False, *, batched=False):
    """Load a quantizer variant on `device` (default: the current CUDA device) now, from the disk
    cache or by compiling, so that its first use, e.g. inside a CUDA graph capture, loads nothing.
    dtype: x's dtype (default torch.bfloat16); output: 'e4m3' or 'int8'; scales: 'row_major',
    'column_major', 'column_major_tma' or 'ue8m0_packed'; batched: the variant's batched kernel
    (calls with batched=True or masked_m). Returns whether every kernel a call of the variant can
    launch is there (the default variant: the seed's two and the family module that takes another
    eps or strided rows)."""
    ops = _ops()
    return ops.warm(device, _torch.bfloat16 if dtype is None else dtype, group_size, output, scales, use_ue8m0,
                    fuse_silu_and_mul, batched)


__all__ = ["per_token_group_quant_fp8", "per_token_group_quant_int8", "warm", "info", "devices", "cache_stats",
           "__version__"]
