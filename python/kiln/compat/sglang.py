"""SGLang's per-token-group quantizers with SGLang's names, signatures, defaults and output
geometry (sglang/kernels/ops/quantization/fp8_kernel.py and int8_kernel.py), each a thin call of
kiln.per_token_group_quant_fp8 / _int8. install() puts them in place of SGLang's in an already
imported sglang (docs/python.md, "Drop-in for vLLM and SGLang").

    import sglang, kiln.compat.sglang
    kiln.compat.sglang.install()
    # -> ["sglang.kernels.ops.quantization.fp8_kernel.sglang_per_token_group_quant_fp8", ...]
"""

from typing import Optional

import torch

from .. import per_token_group_quant_fp8 as _fp8, per_token_group_quant_int8 as _int8
from . import check_group, install as _install

_NAME = "kiln.compat.sglang.sglang_per_token_group_quant_fp8"


def _check_x(x, group_size):
    assert x.shape[-1] % group_size == 0, "the last dimension of `x` cannot be divisible by `group_size`"
    assert x.is_contiguous(), "`x` is not contiguous"


def _flags(output_s, column_major_scales, scale_tma_aligned, scale_ue8m0):
    """(column_major, tma_aligned, ue8m0, pack) for kiln. Without output_s the flags pick the layout
    as SGLang's create_per_token_group_quant_fp8_output_scale does; with it SGLang reads the layout
    off output_s, and kiln's scales are copied into it, so only its dtype matters here."""
    if output_s is not None:
        if output_s.dtype == torch.int32:
            if not scale_ue8m0:
                raise ValueError("int32-packed scale buffers require scale_ue8m0=True")
            return True, True, True, True
        if output_s.dtype != torch.float32:
            raise ValueError(f"Unsupported output_s dtype {output_s.dtype}")
        return False, False, scale_ue8m0, False
    if scale_ue8m0:
        if column_major_scales and scale_tma_aligned:
            return True, True, True, True
        assert not column_major_scales, (
            "column_major_scales requires scale_tma_aligned=True when scale_ue8m0 is enabled")
        return False, False, True, False
    if column_major_scales:
        return True, scale_tma_aligned, False, False
    return False, False, False, False  # scale_tma_aligned alone means nothing in SGLang either


def sglang_per_token_group_quant_fp8(x: torch.Tensor, group_size: int, eps: float = 1e-10,
                                     column_major_scales: bool = False, scale_tma_aligned: bool = False,
                                     scale_ue8m0: bool = False, fuse_silu_and_mul: bool = False,
                                     masked_m: Optional[torch.Tensor] = None, *,
                                     output_q: Optional[torch.Tensor] = None,
                                     output_s: Optional[torch.Tensor] = None):
    """SGLang's sglang_per_token_group_quant_fp8 on kiln's kernel: x [..., H] contiguous ([..., 2H]
    with fuse_silu_and_mul: silu(gate) * up) -> (q float8_e4m3fn [..., H], scales). Scales as
    SGLang allocates them (align4 rounds up to a multiple of 4):

    - row-major float32 [..., G]; scale_ue8m0 alone: the same, powers of two;
    - column_major_scales: [M, G] strides (1, M); with scale_tma_aligned: (1, align4(M));
    - scale_ue8m0 + column_major_scales + scale_tma_aligned: int32 [M, ceil(G/4)] strides
      (1, align4(M)), four UE8M0 bytes per word;
    - x [E, T, H] with masked_m (int32 [E], read on the GPU) or with column-major scales: a batch
      of experts, scales [E, T, G] (packed [E, T, ceil(G/4)]) strides (G*align4(T), 1, align4(T))
      (plain column-major: (G*T, 1, T)). Rows t >= masked_m[e] of expert e are neither read nor
      written, in q and in the scales (output_s included).

    output_q: a contiguous tensor that receives q. output_s: a preallocated scales tensor of the
    shape above; kiln's op has no scales output argument, so the scales are copied into it (a
    copy kernel, masked rows kept). With output_s the scales' dtype comes from it, as in SGLang
    (int32: packed, needs scale_ue8m0) and the layout flags are not read. Any eps > 0 is taken.
    Whole-row per-token quantization (group_size == H on a 2-d x with no flag and no masked_m,
    SGLang's sglang_per_token_quant_fp8 path) and group sizes other than 32, 64, 128 raise
    NotImplementedError."""
    _check_x(x, group_size)
    if (group_size == x.shape[-1] and x.dim() == 2 and not (column_major_scales or scale_ue8m0 or fuse_silu_and_mul)
            and masked_m is None):
        raise NotImplementedError(f"{_NAME}: whole-row per-token quantization (group_size == x.shape[-1] = "
                                  f"{group_size}, SGLang's sglang_per_token_quant_fp8 path) has no kiln kernel")
    check_group(_NAME, group_size, x.shape[-1])
    column, tma, ue8m0, pack = _flags(output_s, column_major_scales, scale_tma_aligned, scale_ue8m0)
    batched = masked_m is not None or (column and x.dim() == 3)
    q, scales = _fp8(x, group_size, eps, column, tma, ue8m0, output_q, pack_ue8m0_scales=pack,
                     fuse_silu_and_mul=fuse_silu_and_mul, masked_m=masked_m, batched=batched)
    if output_s is None:
        return q, scales
    if tuple(output_s.shape) != tuple(scales.shape) or output_s.device != scales.device:
        raise ValueError(f"output_s: expected shape {tuple(scales.shape)} on {scales.device}, "
                         f"got {tuple(output_s.shape)} on {output_s.device}")
    if masked_m is None:
        output_s.copy_(scales)
    else:
        # The rows kiln did not write hold whatever scales' allocation held: keep output_s's there.
        written = torch.arange(scales.shape[1], device=scales.device) < masked_m.unsqueeze(1)
        output_s.copy_(torch.where(written.unsqueeze(-1), scales, output_s))
    return q, output_s


def sglang_per_token_group_quant_fp8_row_padded(x: torch.Tensor, group_size: int, eps: float = 1e-10,
                                                row_alignment: int = 4):
    """SGLang's row-padded form (outputs with rows aligned to row_alignment, the padding rows
    zero-filled) has no kiln kernel: raises NotImplementedError after SGLang's own assertions.
    install() leaves SGLang's in place."""
    assert x.dim() == 2, "row-padded quant expects a 2D input"
    _check_x(x, group_size)
    raise NotImplementedError("kiln.compat.sglang.sglang_per_token_group_quant_fp8_row_padded: the row-padded "
                              f"form (rows aligned to row_alignment = {row_alignment}, padding rows zero-filled) "
                              "has no kiln kernel")


def sglang_per_token_group_quant_int8(x: torch.Tensor, group_size: int, eps: float = 1e-10,
                                      dtype: torch.dtype = torch.int8):
    """SGLang's sglang_per_token_group_quant_int8 on kiln's kernel: x [..., H] contiguous -> (q int8
    [..., H], scales float32 [..., G] row-major); codes are clamp(x / scale) truncated, within
    +-127. Any eps > 0 is taken; group sizes other than 32, 64, 128 raise NotImplementedError."""
    _check_x(x, group_size)
    assert dtype == torch.int8
    check_group("kiln.compat.sglang.sglang_per_token_group_quant_int8", group_size, x.shape[-1])
    return _int8(x, group_size, eps)


def install() -> list:
    """Put sglang_per_token_group_quant_fp8 and sglang_per_token_group_quant_int8 in place of
    SGLang's in every imported sglang module that holds them, aliases included (fp8_kernel's
    per_token_group_quant_fp8 on CUDA, `import ... as` copies); nothing is imported. The row-padded
    form stays SGLang's. Returns the "module.attribute" names replaced; with sglang not imported,
    warns "kiln.compat.sglang.install: sglang is not imported; nothing replaced" and returns []."""
    return _install("sglang", (sglang_per_token_group_quant_fp8, sglang_per_token_group_quant_int8))
