"""The quantizer family's numerics written with PyTorch ops on the GPU, independent of kiln's CPU
reference (kiln/ops/group_quant.hpp states them): absmax = max(max |v| with NaN dropped, eps),
scale = absmax / QMAX (true division), UE8M0 scale = exp2(ceil(log2(max(scale, 1e-10)))) as vLLM
writes it, code = clamp(v / scale) with NaN to QMIN, then e4m3 round-to-nearest-even or int8
truncation. With fuse_silu_and_mul v = g / (1 + exp(-g)) * u in fp32 (torch.exp: the last bit may
differ from kiln's, so callers bound that difference instead of demanding equality).

Used by tests/python/test_op_gpu.py and bench/quant_torch_check.py."""
import torch

QMAX = {"e4m3": (448.0, -448.0), "int8": (127.0, -128.0)}


def quantize(x, k, group, out, ue8m0=False, silu=False, eps=1e-10):
    """(codes as uint8 [M, K], scales fp32 [M, G]) for a 2-d x ([M, K], or [M, 2K] with silu)."""
    qmax, qmin = QMAX[out]
    v = x.float()
    if silu:
        g, u = v[:, :k], v[:, k:]
        v = g / (1 + torch.exp(-g)) * u
    m = v.shape[0]
    groups = v.reshape(m, k // group, group)
    magnitude = groups.abs()
    # fmaxf drops NaN; infinities stay (nan_to_num would turn them into the largest float)
    absmax = torch.where(torch.isnan(magnitude), torch.zeros_like(magnitude), magnitude).amax(-1).clamp_min(eps)
    # Why a tensor divisor: PyTorch divides by a Python scalar as a multiply by its reciprocal,
    # which is not vLLM's (or IEEE) absmax / qmax; tensor by tensor is a true division.
    scale = absmax / torch.full_like(absmax, qmax)
    if ue8m0:
        scale = torch.exp2(torch.ceil(torch.log2(scale.clamp_min(1e-10))))
    ratio = groups / scale.unsqueeze(-1)
    ratio = torch.where(torch.isnan(ratio), torch.full_like(ratio, qmin), ratio.clamp(qmin, qmax))
    if out == "e4m3":
        codes = ratio.to(torch.float8_e4m3fn).view(torch.uint8)
    else:
        codes = ratio.trunc().to(torch.int8).view(torch.uint8)
    return codes.reshape(m, k), scale


def packed_exponents(scale):
    """UE8M0 scales [M, G] as DeepGEMM's int32 words: storage (ceil(G/4), M4), byte g % 4 of word
    (g / 4) * M4 + r, zeros in the padding; returned as the flat uint8 storage."""
    m, g = scale.shape
    m4 = (m + 3) // 4 * 4
    words = (g + 3) // 4
    exps = torch.zeros(words * 4, m4, dtype=torch.uint8, device=scale.device)
    exps[:g, :m] = ((scale.view(torch.int32) >> 23) & 0xFF).to(torch.uint8).t()
    return exps.view(words, 4, m4).permute(0, 2, 1).contiguous().flatten()
