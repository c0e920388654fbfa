"""kiln.compat.vllm and kiln.compat.sglang on a GPU: bytes against tests/python/torch_reference.py
for every combination the functions allow, the packed layout's padding bytes zero in storage that
held garbage, the all-zero group's UE8M0 byte, a scale whose mantissa rounds up, masked rows
untouched (q and a preallocated output_s), torch.compile(fullgraph=True) and CUDA graph capture."""
import itertools
import math

import pytest
import torch

import torch_reference
from kiln.compat import sglang, vllm

pytestmark = pytest.mark.gpu

POISON = 0x5A  # a byte no kernel writes everywhere: what a call must not touch keeps it
GROUPS = (32, 64, 128)


def sample(shape, dtype=torch.bfloat16, seed=0, special=True):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(*shape, device="cuda", generator=g) * 3
    if special and shape[-2] >= 5:
        rows = x.view(-1, shape[-1])
        rows[1, :128] = 0  # an all-zero group
        rows[2, 5], rows[3, 7], rows[4, 9] = float("nan"), float("inf"), float("-inf")
    return x.to(dtype)


def poisoned(shape, dtype):
    return torch.full(shape, POISON, dtype=torch.uint8, device="cuda").view(dtype)


def poison_next_allocation(nbytes):
    """Fill a block of nbytes with POISON and free it, so that the caching allocator most likely
    hands it to the next allocation of that size; returns its address to tell whether it did."""
    filler = torch.full((nbytes,), POISON, dtype=torch.uint8, device="cuda")
    address = filler.data_ptr()
    del filler
    return address


def storage_bytes(t):
    """The whole storage under t (a view's padding included), as uint8."""
    words = t.untyped_storage().nbytes() // t.element_size()
    return torch.as_strided(t, (words,), (1,), 0).view(torch.uint8)


def assert_codes(q, codes, silu):
    diff = (q.contiguous().view(torch.uint8).to(torch.int32) - codes.to(torch.int32)).abs()
    if silu:  # torch.exp against kiln's portable e^x: bounded, not equal (test_op_gpu.py)
        assert int((diff != 0).sum()) <= max(1, diff.numel() // 1000)
    else:
        assert not bool(diff.any()), "q differs from the torch reference"


def assert_scales(scales, ref, silu):
    diff = (scales.contiguous().view(torch.int32) - ref.view(torch.int32)).abs()
    assert not bool((diff > (8 if silu else 0)).any()), "scales differ from the torch reference"


# ---- vLLM ----

@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("column,tma,ue8m0", list(itertools.product((False, True), (False, True), (None, False, True))))
@pytest.mark.parametrize("lead", [(67,), (3, 21)])
def test_vllm_fp8_against_torch(lead, column, tma, ue8m0, group, dtype):
    if len(lead) == 2 and column and not tma:
        lead = (63,)  # vLLM has no 3-d plain column-major layout (test_compat_cpu.py)
    k = 1024
    x = sample(lead + (k,), dtype, seed=group)
    out = poisoned(lead + (k,), torch.float8_e4m3fn)
    q, scales = vllm.per_token_group_quant_fp8(x, group, 1e-10, None, column, tma, out, ue8m0)
    torch.cuda.synchronize()
    assert q is out
    codes, ref = torch_reference.quantize(x.reshape(-1, k), k, group, "e4m3", ue8m0 is True)
    assert_codes(q.reshape(-1, k), codes, False)
    assert_scales(scales.reshape(-1, k // group), ref, False)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("group", GROUPS)
def test_vllm_int8_against_torch(group, dtype):
    x = sample((2, 35, 768), dtype, seed=group)
    q, scales = vllm.per_token_group_quant_int8(x, group)
    torch.cuda.synchronize()
    codes, ref = torch_reference.quantize(x.view(70, 768), 768, group, "int8")
    assert q.dtype == torch.int8 and scales.shape == (2, 35, 768 // group)
    assert_codes(q.view(70, 768), codes, False)
    assert_scales(scales.view(70, -1), ref, False)


@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("m,groups", [(1, 4), (5, 5), (8, 7), (67, 8), (33, 9)])
@pytest.mark.parametrize("eps", [1e-10, 1e-4])
def test_vllm_packed_bytes_and_padding(m, groups, group, eps):
    k = groups * group
    x = sample((m, k), seed=m + groups)
    words, m4 = (groups + 3) // 4, (m + 3) // 4 * 4
    out = poisoned((m, k), torch.float8_e4m3fn)
    at = poison_next_allocation(4 * words * m4)  # the call's only allocation is the scales
    q, scales = vllm.per_token_group_quant_fp8_packed_for_deepgemm(x, group, eps, True, out)
    torch.cuda.synchronize()
    assert (tuple(scales.shape), scales.stride(), scales.dtype) == ((m, words), (1, m4), torch.int32)
    codes, ref = torch_reference.quantize(x, k, group, "e4m3", True, eps=eps)
    assert_codes(q, codes, False)
    # Every byte of the storage: the exponents, and zeros in the padding (the groups past G in the
    # last word, the rows past M), whatever the storage held (POISON when `at` was reused).
    got = storage_bytes(scales)
    assert torch.equal(got, torch_reference.packed_exponents(ref)), (
        f"packed scales differ (storage {'was' if scales.data_ptr() == at else 'was not'} the poisoned block)")


def ue8m0_byte_of_zero_group(eps):
    """exp2(ceil(log2(max(eps / 448, 1e-10)))) as a UE8M0 byte, eps / 448 in float32 as the kernel does."""
    floor = max(float(torch.tensor(eps, dtype=torch.float32) / torch.tensor(448.0)), 1e-10)
    return 127 + math.ceil(math.log2(floor))


@pytest.mark.parametrize("eps,byte", [(1e-10, 94), (1e-4, 105)])
def test_all_zero_group_ue8m0_byte(eps, byte):
    assert ue8m0_byte_of_zero_group(eps) == byte
    x = sample((6, 512), special=False)
    x[2, 128:256] = 0  # group 1 of row 2
    _, packed = vllm.per_token_group_quant_fp8_packed_for_deepgemm(x, 128, eps, True)
    _, sgl_packed = sglang.sglang_per_token_group_quant_fp8(x, 128, eps, True, True, True)
    _, pow2 = vllm.per_token_group_quant_fp8(x, 128, eps, use_ue8m0=True)
    torch.cuda.synchronize()
    for words in (packed, sgl_packed):
        assert (int(words[2, 0]) >> 8) & 0xFF == byte
    assert float(pow2[2, 1]) == 2.0 ** (byte - 127)


@pytest.mark.parametrize("power", [-3, 0, 4])
def test_scale_whose_mantissa_rounds_up(power):
    # absmax = 448 * 2^p * (1 + 2^-7): the scale 2^p * (1 + 2^-7) rounds up to 2^(p+1); an absmax
    # of exactly 448 * 2^p keeps 2^p. float32 x holds both exactly.
    x = torch.zeros(4, 256, device="cuda")
    x[0, 3] = 448.0 * 2.0 ** power * (1 + 2.0 ** -7)
    x[1, 130] = -448.0 * 2.0 ** power
    _, packed = vllm.per_token_group_quant_fp8_packed_for_deepgemm(x, 128, use_ue8m0=True)
    _, pow2 = sglang.sglang_per_token_group_quant_fp8(x, 128, scale_ue8m0=True)
    torch.cuda.synchronize()
    assert int(packed[0, 0]) & 0xFF == 127 + power + 1 and float(pow2[0, 0]) == 2.0 ** (power + 1)
    assert (int(packed[1, 0]) >> 8) & 0xFF == 127 + power and float(pow2[1, 1]) == 2.0 ** power
    codes, ref = torch_reference.quantize(x, 256, 128, "e4m3", True)
    assert torch.equal(storage_bytes(packed), torch_reference.packed_exponents(ref))


# ---- SGLang ----

# (column_major_scales, scale_tma_aligned, scale_ue8m0) SGLang allocates for
SGLANG_LAYOUTS = {"row": (False, False, False), "row_ue8m0": (False, False, True), "col": (True, False, False),
                  "tma": (True, True, False), "packed": (True, True, True)}


def expert_scale_rows(scales, e, layout):
    """Expert e's scales as the reference gives them: fp32 [T, G], or for the packed layout the
    flat storage bytes of its block (torch_reference.packed_exponents)."""
    if layout != "packed":
        return scales[e].contiguous()
    words, t4 = scales.shape[2], scales.stride(2)
    flat = torch.as_strided(scales, (words * t4,), (1,), scales.storage_offset() + e * scales.stride(0))
    return flat.contiguous().view(torch.uint8)


@pytest.mark.parametrize("layout", list(SGLANG_LAYOUTS))
@pytest.mark.parametrize("group", [32, 128])
@pytest.mark.parametrize("silu", [False, True])
def test_sglang_2d_against_torch(layout, group, silu):
    m, h = 67, 640
    x = sample((m, 2 * h if silu else h), seed=group, special=not silu)
    q, scales = sglang.sglang_per_token_group_quant_fp8(x, group, 1e-10, *SGLANG_LAYOUTS[layout], silu)
    torch.cuda.synchronize()
    codes, ref = torch_reference.quantize(x, h, group, "e4m3", SGLANG_LAYOUTS[layout][2], silu)
    assert_codes(q, codes, silu)
    if layout == "packed":
        if not silu:
            assert torch.equal(storage_bytes(scales), torch_reference.packed_exponents(ref))
    else:
        assert_scales(scales, ref, silu)


def packed_rows(words, t4, rows):
    """Rows [0, rows) of a packed block's reference storage bytes (packed_exponents: word w of row
    r at w * t4 + r) as [rows, 4 * words], the bytes of the int32 view's rows."""
    return words.view(-1, t4, 4)[:, :rows].permute(1, 0, 2).reshape(rows, -1)


@pytest.mark.parametrize("layout", list(SGLANG_LAYOUTS))
@pytest.mark.parametrize("group", [32, 128])
@pytest.mark.parametrize("silu", [False, True])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("preallocated", [False, True])
def test_sglang_batched_against_torch(layout, group, silu, masked, preallocated):
    # A 3-d x with plain column-major scales and no output_s gets kiln's batch layout (SGLang has none).
    experts, t, h = 5, 37, 640
    g, t4 = h // group, (t + 3) // 4 * 4
    column, tma, ue8m0 = SGLANG_LAYOUTS[layout]
    x = sample((experts, t, 2 * h if silu else h), seed=7, special=False)
    counts = torch.tensor([37, 0, 5, 36, -3], dtype=torch.int32, device="cuda")
    output_q = poisoned((experts, t, h), torch.float8_e4m3fn)
    output_s = None
    fill = POISON * 0x01010101
    if preallocated:  # SGLang's own allocation, filled with POISON
        if layout == "packed":
            output_s = torch.full((experts, (g + 3) // 4, t4), fill, dtype=torch.int32,
                                  device="cuda").transpose(-1, -2)[:, :t, :]
        else:
            output_s = torch.full((experts, t, g), fill, dtype=torch.int32, device="cuda").view(torch.float32)
    q, scales = sglang.sglang_per_token_group_quant_fp8(x, group, 1e-10, column, tma, ue8m0, silu,
                                                        counts if masked else None, output_q=output_q,
                                                        output_s=output_s)
    torch.cuda.synchronize()
    assert q is output_q and (output_s is None or scales is output_s)
    limits = [max(0, min(int(c), t)) if masked else t for c in counts.tolist()]
    for e in range(experts):
        rows = limits[e]
        codes, ref = torch_reference.quantize(x[e], h, group, "e4m3", ue8m0, silu)
        assert_codes(q[e, :rows], codes[:rows], silu)
        assert bool((q[e, rows:].view(torch.uint8) == POISON).all()), f"expert {e}: q rows from {rows} on written"
        if layout == "packed":
            if not silu:
                got = scales[e, :rows].contiguous().view(torch.uint8)
                assert torch.equal(got, packed_rows(torch_reference.packed_exponents(ref), t4, rows)), f"expert {e}"
                if output_s is None and rows == t:  # kiln's allocation: its padding is zero too
                    assert torch.equal(expert_scale_rows(scales, e, layout), torch_reference.packed_exponents(ref))
        else:
            assert_scales(scales[e, :rows], ref[:rows], silu)
        if output_s is not None and rows < t:
            assert bool((scales[e, rows:].contiguous().view(torch.int32) == fill).all()), (
                f"expert {e}: output_s rows from {rows} on written")


@pytest.mark.parametrize("group", GROUPS)
def test_sglang_int8_against_torch(group):
    x = sample((2, 35, 768), seed=group)
    q, scales = sglang.sglang_per_token_group_quant_int8(x, group)
    torch.cuda.synchronize()
    codes, ref = torch_reference.quantize(x.view(70, 768), 768, group, "int8")
    assert_codes(q.view(70, 768), codes, False)
    assert_scales(scales.view(70, -1), ref, False)


# ---- torch.compile and CUDA graphs ----

def test_torch_compile_fullgraph():
    torch._dynamo.reset()

    def f(x, x3, counts, output_q, output_s):
        q, s = vllm.per_token_group_quant_fp8(x * 1, 128, column_major_scales=True, tma_aligned_scales=True)
        qp, sp = vllm.per_token_group_quant_fp8_packed_for_deepgemm(x, 128, use_ue8m0=True)
        q3, s3 = sglang.sglang_per_token_group_quant_fp8(x3, 128, masked_m=counts, output_q=output_q,
                                                         output_s=output_s)
        return q, s, qp, sp, q3, s3

    compiled = torch.compile(f, fullgraph=True)
    x, x3 = sample((33, 1024), seed=3), sample((4, 16, 512), seed=4, special=False)
    counts = torch.tensor([16, 3, 0, 9], dtype=torch.int32, device="cuda")
    # Fresh poisoned outputs each: the masked rows keep the poison in both.
    got = compiled(x, x3, counts, poisoned((4, 16, 512), torch.float8_e4m3fn), torch.zeros(4, 16, 4, device="cuda"))
    want = f(x, x3, counts, poisoned((4, 16, 512), torch.float8_e4m3fn), torch.zeros(4, 16, 4, device="cuda"))
    torch.cuda.synchronize()
    for a, b in zip(got, want):
        assert (a.shape, a.stride(), a.dtype) == (b.shape, b.stride(), b.dtype)
        assert torch.equal(a.view(torch.uint8) if a.element_size() == 1 else a.view(torch.int32),
                           b.view(torch.uint8) if b.element_size() == 1 else b.view(torch.int32))


def test_cuda_graph_capture_and_replay():
    experts, t, h = 4, 64, 1024
    x = sample((experts, t, h), seed=30, special=False)
    counts = torch.tensor([64, 10, 0, 33], dtype=torch.int32, device="cuda")
    output_q = poisoned((experts, t, h), torch.float8_e4m3fn)
    output_s = torch.zeros(experts, t, h // 128, device="cuda")
    x2 = sample((48, 512), seed=31)

    def step():
        sglang.sglang_per_token_group_quant_fp8(x, 128, masked_m=counts, output_q=output_q, output_s=output_s)
        return vllm.per_token_group_quant_fp8_packed_for_deepgemm(x2, 128, use_ue8m0=True)

    step()  # warm-up outside the capture: the variants are loaded
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        q2, s2 = step()
    for seed, new in ((32, [1, 64, 7, 0]), (33, [50, 50, 64, 2])):
        x.copy_(sample((experts, t, h), seed=seed, special=False))
        x2.copy_(sample((48, 512), seed=seed + 100))
        counts.copy_(torch.tensor(new, dtype=torch.int32))
        output_q.view(torch.uint8).fill_(POISON)
        output_s.fill_(-1.0)
        graph.replay()
        torch.cuda.synchronize()
        for e in range(experts):
            codes, ref = torch_reference.quantize(x[e], h, 128, "e4m3")
            rows = new[e]
            assert_codes(output_q[e, :rows], codes[:rows], False)
            assert_scales(output_s[e, :rows], ref[:rows], False)
            assert bool((output_q[e, rows:].view(torch.uint8) == POISON).all())
            assert bool((output_s[e, rows:] == -1.0).all())
        codes, ref = torch_reference.quantize(x2, 512, 128, "e4m3", True)
        assert_codes(q2, codes, False)
        assert torch.equal(storage_bytes(s2), torch_reference.packed_exponents(ref))
