"""vLLM's per-token-group quantizers with vLLM's names, signatures, defaults and output geometry
(vllm/model_executor/layers/quantization/utils/fp8_utils.py and int8_utils.py), each a thin call
of kiln.per_token_group_quant_fp8 / _int8. install() puts them in place of vLLM's in an already
imported vllm (docs/python.md, "Drop-in for vLLM and SGLang").

    import vllm, kiln.compat.vllm
    kiln.compat.vllm.install()
    # -> ["vllm.model_executor.layers.quantization.utils.fp8_utils.per_token_group_quant_fp8", ...]
"""

from typing import Optional

import torch

from .. import per_token_group_quant_fp8 as _fp8, per_token_group_quant_int8 as _int8
from . import check_group, install as _install


def _check_x(x, group_size, caller):
    assert x.shape[-1] % group_size == 0, (
        f"the last dimension of `x` {x.shape[-1]} must be divisible by `group_size` {group_size}")
    assert x.stride(-1) == 1, "`x` groups must be contiguous"
    check_group(caller, group_size, x.shape[-1])


def per_token_group_quant_fp8(x: torch.Tensor, group_size: int, eps: float = 1e-10,
                              dtype: Optional[torch.dtype] = None, column_major_scales: bool = False,
                              tma_aligned_scales: bool = False, out_q: Optional[torch.Tensor] = None,
                              use_ue8m0: Optional[bool] = None):
    """vLLM's per_token_group_quant_fp8 on kiln's kernel: x [..., K] -> (q float8_e4m3fn like x,
    scales float32). Scales: row-major [..., G]; column_major_scales: (M, G) strides (1, M);
    with tma_aligned_scales too: strides (1, align4(M)), or for a 3-d x [B, M, K]
    (align4(M)*G, 1, align4(M)). tma_aligned_scales without column_major_scales is ignored, as in
    vLLM. use_ue8m0=None is what vLLM does without DeepGEMM (is_deep_gemm_e8m0_used() is False):
    plain fp32 scales; True rounds them up to powers of two. dtype=None is float8_e4m3fn
    (current_platform.fp8_dtype() on CUDA), the only dtype kiln writes. out_q: a contiguous
    tensor of x's shape that receives q. Group sizes 32, 64, 128; others raise
    NotImplementedError."""
    _check_x(x, group_size, "kiln.compat.vllm.per_token_group_quant_fp8")
    assert out_q is None or out_q.shape == x.shape
    tma = tma_aligned_scales if column_major_scales else False
    # Why batched for a 3-d x with column-major scales: vLLM's 3-d layout is kiln's batch layout.
    batched = column_major_scales is True and x.dim() == 3
    return _fp8(x, group_size, eps, column_major_scales, tma, False if use_ue8m0 is None else use_ue8m0, out_q,
                dtype=dtype, batched=batched)


def per_token_group_quant_int8(x: torch.Tensor, group_size: int, eps: float = 1e-10,
                               dtype: torch.dtype = torch.int8):
    """vLLM's per_token_group_quant_int8 (int8_utils.py) on kiln's kernel: x [..., K] contiguous
    -> (q int8 like x, scales float32 [..., G] row-major); codes are clamp(x / scale) truncated,
    within +-127."""
    assert x.shape[-1] % group_size == 0, "the last dimension of `x` cannot be divisible by `group_size`"
    assert x.is_contiguous(), "`x` is not contiguous"
    check_group("kiln.compat.vllm.per_token_group_quant_int8", group_size, x.shape[-1])
    return _int8(x, group_size, eps, dtype=dtype)


def per_token_group_quant_fp8_packed_for_deepgemm(x: torch.Tensor, group_size: int, eps: float = 1e-10,
                                                  use_ue8m0: Optional[bool] = None,
                                                  out_q: Optional[torch.Tensor] = None):
    """vLLM's per_token_group_quant_fp8_packed_for_deepgemm on kiln's kernel: x [..., K] ->
    (q float8_e4m3fn like x, scales int32 [MN, ceil(G/4)] with strides (1, align4(MN))), MN the
    rows of x: four UE8M0 exponent bytes per word, DeepGEMM's layout on SM100. Every padding
    byte of the scales' storage (groups past G in the last word, rows past MN) is written 0; an
    all-zero group gets the byte of exp2(ceil(log2(max(eps / 448, 1e-10)))). use_ue8m0=None is
    what vLLM does without DeepGEMM (False), which, as in vLLM, fails its assertion that UE8M0
    scales are required: pass use_ue8m0=True."""
    assert use_ue8m0, "per_token_group_quant_fp8_packed_for_deepgemm requires UE8M0 scales."
    _check_x(x, group_size, "kiln.compat.vllm.per_token_group_quant_fp8_packed_for_deepgemm")
    rows = x.reshape(-1, x.shape[-1])
    # Why view, not reshape: a copy would take the codes instead of out_q.
    q, scales = _fp8(rows, group_size, eps, True, True, True, None if out_q is None else out_q.view(rows.shape),
                     pack_ue8m0_scales=True)
    return q.view_as(x), scales


def install() -> list:
    """Put this module's functions in place of vLLM's in every imported vllm module that holds
    them (nothing is imported). Returns the "module.attribute" names replaced; with vllm not
    imported, warns "kiln.compat.vllm.install: vllm is not imported; nothing replaced" and
    returns []."""
    return _install("vllm", (per_token_group_quant_fp8, per_token_group_quant_int8,
                             per_token_group_quant_fp8_packed_for_deepgemm))
