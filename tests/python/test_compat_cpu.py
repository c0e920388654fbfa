"""kiln.compat.vllm and kiln.compat.sglang without a GPU: the upstream signatures, the outputs'
shapes, strides and dtypes for every combination each function allows (meta tensors, against the
upstream allocation code written out below), the argument errors, NotImplementedError where kiln
has no kernel, torch.compile(fullgraph=True), and install() on fake vllm / sglang modules."""
import inspect
import itertools
import sys
import types
import warnings

import pytest
import torch

from kiln.compat import sglang, vllm

FP8 = torch.float8_e4m3fn


def meta(*shape, dtype=torch.bfloat16):
    return torch.empty(*shape, dtype=dtype, device="meta")


def geometry(t):
    """Shape, strides and dtype. Why strides of dimensions of size 1 (and of empty tensors) are
    left out: nothing is addressed through them, and torch itself gives them different values."""
    empty = t.numel() == 0
    return tuple(t.shape), tuple(None if empty or n == 1 else s for n, s in zip(t.shape, t.stride())), t.dtype


def layout(shape, strides, dtype):
    return geometry(torch.empty_strided(shape, strides, dtype=dtype, device="meta"))


def align4(n):
    return (n + 3) // 4 * 4


# ---- signatures: names, kinds and defaults exactly as upstream defines them ----

P, K = inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY
SIGNATURES = {
    vllm.per_token_group_quant_fp8: [
        ("x", P, None), ("group_size", P, None), ("eps", P, 1e-10), ("dtype", P, None),
        ("column_major_scales", P, False), ("tma_aligned_scales", P, False), ("out_q", P, None),
        ("use_ue8m0", P, None)],
    vllm.per_token_group_quant_int8: [
        ("x", P, None), ("group_size", P, None), ("eps", P, 1e-10), ("dtype", P, torch.int8)],
    vllm.per_token_group_quant_fp8_packed_for_deepgemm: [
        ("x", P, None), ("group_size", P, None), ("eps", P, 1e-10), ("use_ue8m0", P, None), ("out_q", P, None)],
    sglang.sglang_per_token_group_quant_fp8: [
        ("x", P, None), ("group_size", P, None), ("eps", P, 1e-10), ("column_major_scales", P, False),
        ("scale_tma_aligned", P, False), ("scale_ue8m0", P, False), ("fuse_silu_and_mul", P, False),
        ("masked_m", P, None), ("output_q", K, None), ("output_s", K, None)],
    sglang.sglang_per_token_group_quant_fp8_row_padded: [
        ("x", P, None), ("group_size", P, None), ("eps", P, 1e-10), ("row_alignment", P, 4)],
    sglang.sglang_per_token_group_quant_int8: [
        ("x", P, None), ("group_size", P, None), ("eps", P, 1e-10), ("dtype", P, torch.int8)],
}


@pytest.mark.parametrize("fn", list(SIGNATURES), ids=lambda fn: fn.__name__)
def test_upstream_signatures(fn):
    empty = inspect.Parameter.empty
    got = [(p.name, p.kind, None if p.default is empty else p.default)
           for p in inspect.signature(fn).parameters.values()]
    assert got == SIGNATURES[fn]
    assert inspect.signature(fn).parameters["group_size"].default is empty


# ---- vLLM: per_token_group_quant_fp8 ----

def vllm_scales(shape, group, column, tma):
    """fp8_utils.per_token_group_quant_fp8's allocation of the scales, on meta."""
    shape = tuple(shape)
    if column:
        if tma:
            m, sf_k = shape[-2], shape[-1] // group
            stride = (1, align4(m)) if len(shape) == 2 else (align4(m) * sf_k, 1, align4(m))
            return torch.empty_strided(shape[:-2] + (m, sf_k), stride, dtype=torch.float32, device="meta")
        return torch.empty(shape[:-2] + (shape[-1] // group, shape[-2]), dtype=torch.float32,
                           device="meta").permute(-1, -2)
    return torch.empty(shape[:-1] + (shape[-1] // group,), dtype=torch.float32, device="meta")


VLLM_FLAGS = [dict(column_major_scales=c, tma_aligned_scales=t, use_ue8m0=u)
              for c, t, u in itertools.product((False, True), (False, True), (None, False, True))]


@pytest.mark.parametrize("flags", VLLM_FLAGS, ids=str)
@pytest.mark.parametrize("group", [32, 64, 128])
@pytest.mark.parametrize("xdtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("shape", [(1, 512), (5, 512), (8, 384), (0, 256), (3, 7, 512), (2, 3, 4, 256)])
def test_vllm_fp8_geometry(shape, xdtype, group, flags):
    x = meta(*shape, dtype=xdtype)
    column = flags["column_major_scales"]
    if column and len(shape) > 3 or column and not flags["tma_aligned_scales"] and len(shape) == 3:
        # vLLM's own allocation fails there (permute(-1, -2) of a 3-d tensor; a 3-d stride for a
        # 4-d shape); kiln refuses a 4-d x and gives a 3-d one its batch layout, (G*M, 1, M).
        if len(shape) == 3:
            q, scales = vllm.per_token_group_quant_fp8(x, group, **flags)
            g = shape[-1] // group
            assert geometry(scales) == layout((shape[0], shape[1], g), (g * shape[1], 1, shape[1]), torch.float32)
        else:
            with pytest.raises(ValueError, match=r"^x: column-major scales \(column_major(_tma)?\) need a 2-d x "
                                                 r"\(M, K\), got shape \(2, 3, 4, 256\)$"):
                vllm.per_token_group_quant_fp8(x, group, **flags)
        return
    q, scales = vllm.per_token_group_quant_fp8(x, group, **flags)
    assert geometry(q) == geometry(meta(*shape, dtype=FP8))
    assert geometry(scales) == geometry(vllm_scales(shape, group, column, flags["tma_aligned_scales"]))


def test_vllm_fp8_positional_arguments_are_vllms():
    x = meta(6, 256)
    out = torch.empty(6, 256, dtype=FP8, device="meta")
    q, scales = vllm.per_token_group_quant_fp8(x, 128, 1e-4, FP8, True, True, out, True)
    assert q is out and geometry(scales) == layout((6, 2), (1, 8), torch.float32)


def test_vllm_fp8_out_q_and_dtype():
    x = meta(2, 3, 256)
    out = torch.empty(2, 3, 256, dtype=FP8, device="meta")
    q, _ = vllm.per_token_group_quant_fp8(x, 64, out_q=out)
    assert q is out
    with pytest.raises(AssertionError):
        vllm.per_token_group_quant_fp8(x, 64, out_q=torch.empty(6, 256, dtype=FP8, device="meta"))
    with pytest.raises(TypeError, match=r"^dtype: expected None or torch.float8_e4m3fn, got torch.int8$"):
        vllm.per_token_group_quant_fp8(x, 64, dtype=torch.int8)


def test_vllm_fp8_argument_errors():
    with pytest.raises(AssertionError, match=r"the last dimension of `x` 200 must be divisible by `group_size` 128"):
        vllm.per_token_group_quant_fp8(meta(4, 200), 128)
    with pytest.raises(AssertionError, match=r"`x` groups must be contiguous"):
        vllm.per_token_group_quant_fp8(meta(256, 4).t(), 128)
    # Rows of a wider buffer: vLLM takes them (stride(-1) == 1), so does kiln, without a copy.
    q, scales = vllm.per_token_group_quant_fp8(meta(4, 512)[:, :256], 128)
    assert q.shape == (4, 256) and scales.shape == (4, 2)
    with pytest.raises(TypeError, match=r"^column_major_scales: expected a bool"):
        vllm.per_token_group_quant_fp8(meta(4, 256), 128, column_major_scales=1)


@pytest.mark.parametrize("group,k,what", [(16, 256, "group_size 16 has"), (256, 512, "group_size 256 has"),
                                          (7168, 7168, r"group_size 7168 \(whole-row per-token quantization")])
@pytest.mark.parametrize("fn", [vllm.per_token_group_quant_fp8, vllm.per_token_group_quant_int8,
                                sglang.sglang_per_token_group_quant_int8], ids=lambda fn: fn.__name__)
def test_group_sizes_without_a_kiln_kernel(fn, group, k, what):
    with pytest.raises(NotImplementedError, match=rf"^kiln.compat.\w+.{fn.__name__}: {what}.* no kiln kernel; "
                                                  r"kiln's group sizes are 32, 64, 128$"):
        fn(meta(4, k), group)


# ---- vLLM: per_token_group_quant_int8 ----

@pytest.mark.parametrize("group", [32, 64, 128])
@pytest.mark.parametrize("shape", [(1, 256), (9, 384), (2, 5, 256), (0, 128)])
def test_vllm_int8_geometry(shape, group):
    q, scales = vllm.per_token_group_quant_int8(meta(*shape), group)
    assert geometry(q) == geometry(meta(*shape, dtype=torch.int8))
    expected = shape[:-1] + (shape[-1] // group,)
    assert geometry(scales) == geometry(meta(*expected, dtype=torch.float32))


def test_vllm_int8_errors():
    with pytest.raises(AssertionError, match=r"^`x` is not contiguous$"):
        vllm.per_token_group_quant_int8(meta(4, 512)[:, :256], 128)
    with pytest.raises(AssertionError, match=r"cannot be divisible by `group_size`"):
        vllm.per_token_group_quant_int8(meta(4, 200), 128)
    with pytest.raises(TypeError, match=r"^dtype: expected None or torch.int8"):
        vllm.per_token_group_quant_int8(meta(4, 256), 128, dtype=torch.uint8)


# ---- vLLM: per_token_group_quant_fp8_packed_for_deepgemm ----

@pytest.mark.parametrize("group", [32, 64, 128])
@pytest.mark.parametrize("shape", [(1, 128), (5, 640), (8, 512), (13, 896), (2, 3, 640), (0, 256)])
def test_vllm_packed_geometry(shape, group):
    x = meta(*shape)
    q, scales = vllm.per_token_group_quant_fp8_packed_for_deepgemm(x, group, use_ue8m0=True)
    mn, words = x.numel() // shape[-1], (shape[-1] // group + 3) // 4
    assert geometry(q) == geometry(meta(*shape, dtype=FP8))
    assert geometry(scales) == layout((mn, words), (1, align4(mn)), torch.int32)
    # The padding rows past mn are allocated: DeepGEMM reads whole TMA boxes (and kiln zeroes them).
    assert scales.untyped_storage().nbytes() == 4 * words * align4(mn)


def test_vllm_packed_out_q_and_use_ue8m0():
    x = meta(2, 3, 512)
    out = torch.empty(2, 3, 512, dtype=FP8, device="meta")
    q, scales = vllm.per_token_group_quant_fp8_packed_for_deepgemm(x, 128, 1e-10, True, out)
    assert q.shape == (2, 3, 512) and q.untyped_storage().nbytes() == out.untyped_storage().nbytes()
    assert q._base is out or q._base is out._base or q is out
    # None is what vLLM does without DeepGEMM: no UE8M0, which the packed layout requires.
    for use_ue8m0 in (None, False):
        with pytest.raises(AssertionError, match=r"^per_token_group_quant_fp8_packed_for_deepgemm requires UE8M0 "
                                                 r"scales\.$"):
            vllm.per_token_group_quant_fp8_packed_for_deepgemm(x, 128, use_ue8m0=use_ue8m0)
    with pytest.raises(AssertionError, match=r"must be divisible by `group_size` 128"):
        vllm.per_token_group_quant_fp8_packed_for_deepgemm(meta(4, 200), 128, use_ue8m0=True)


# ---- SGLang: sglang_per_token_group_quant_fp8 ----

def sglang_scales(out_shape, group, column, tma, ue8m0):
    """fp8_kernel.create_per_token_group_quant_fp8_output_scale, on meta (None where it fails)."""
    out_shape = tuple(out_shape)
    if ue8m0:
        if column and tma:
            *batch, mn, k = out_shape
            return torch.empty((*batch, align4(k // group) // 4, align4(mn)), dtype=torch.int32,
                               device="meta").transpose(-1, -2)[..., :mn, :]
        if column:
            return None  # SGLang asserts
        return torch.empty(out_shape[:-1] + (out_shape[-1] // group,), dtype=torch.float32, device="meta")
    if column:
        if tma:
            return torch.empty(out_shape[:-2] + (out_shape[-1] // group, align4(out_shape[-2])), dtype=torch.float32,
                               device="meta").transpose(-1, -2)[..., :out_shape[-2], :]
        if len(out_shape) != 2:
            return None  # permute(-1, -2) of a 3-d tensor fails in SGLang
        return torch.empty((out_shape[-1] // group,) + out_shape[:-1], dtype=torch.float32,
                           device="meta").permute(-1, -2)
    return torch.empty(out_shape[:-1] + (out_shape[-1] // group,), dtype=torch.float32, device="meta")


SGLANG_FLAGS = [dict(column_major_scales=c, scale_tma_aligned=t, scale_ue8m0=u)
                for c, t, u in itertools.product((False, True), repeat=3)]
# (x's leading shape, masked): 2-d, 3-d batches of experts with and without masked_m
SGLANG_SHAPES = [((1,), False), ((5,), False), ((8,), False), ((3, 7), True), ((4, 8), True), ((2, 0), True),
                 ((3, 5), False)]


@pytest.mark.parametrize("flags", SGLANG_FLAGS, ids=str)
@pytest.mark.parametrize("silu", [False, True])
@pytest.mark.parametrize("group", [32, 64, 128])
@pytest.mark.parametrize("lead,masked", SGLANG_SHAPES)
@pytest.mark.parametrize("groups", [4, 5])
def test_sglang_fp8_geometry(lead, masked, groups, group, silu, flags):
    h = group * groups
    x = meta(*lead, 2 * h if silu else h)
    masked_m = torch.empty(lead[0], dtype=torch.int32, device="meta") if masked else None
    column, tma, ue8m0 = flags.values()
    expected = sglang_scales(lead + (h,), group, column, tma, ue8m0)
    if ue8m0 and column and not tma:
        with pytest.raises(AssertionError, match=r"column_major_scales requires scale_tma_aligned=True"):
            sglang.sglang_per_token_group_quant_fp8(x, group, 1e-10, **flags, fuse_silu_and_mul=silu,
                                                    masked_m=masked_m)
        return
    q, scales = sglang.sglang_per_token_group_quant_fp8(x, group, 1e-10, *flags.values(), silu, masked_m)
    assert geometry(q) == geometry(meta(*lead, h, dtype=FP8))
    if expected is None:  # a 3-d x with plain column-major scales: kiln's batch layout
        t = lead[1]
        assert geometry(scales) == layout(lead + (groups,), (groups * t, 1, t), torch.float32)
    else:
        assert geometry(scales) == geometry(expected)
        if ue8m0 and column and tma:
            assert scales.untyped_storage().nbytes() == expected.untyped_storage().nbytes()


def test_sglang_fp8_preallocated_outputs():
    x, t, h = meta(4, 6, 512), 6, 512
    masked_m = torch.empty(4, dtype=torch.int32, device="meta")
    out_q = torch.empty(4, t, h, dtype=FP8, device="meta")
    cases = [  # (output_s, flags): SGLang reads the layout off output_s, not off the flags
        (sglang_scales((4, t, h), 128, True, True, False), {}),
        (sglang_scales((4, t, h), 128, True, True, True), dict(scale_ue8m0=True)),
        (torch.empty(4, t, 4, dtype=torch.float32, device="meta"), dict(column_major_scales=True)),
        (torch.empty(4, t, 4, dtype=torch.float32, device="meta"), dict(scale_ue8m0=True)),
        (torch.empty(4, t, 1, dtype=torch.int32, device="meta"), dict(scale_ue8m0=True)),  # row-major packed
    ]
    for output_s, flags in cases:
        for m in (None, masked_m):
            q, scales = sglang.sglang_per_token_group_quant_fp8(x, 128, masked_m=m, output_q=out_q, output_s=output_s,
                                                                **flags)
            assert q is out_q and scales is output_s
    with pytest.raises(ValueError, match=r"^int32-packed scale buffers require scale_ue8m0=True$"):
        sglang.sglang_per_token_group_quant_fp8(x, 128, output_s=cases[1][0])
    with pytest.raises(ValueError, match=r"^Unsupported output_s dtype torch.float16$"):
        sglang.sglang_per_token_group_quant_fp8(x, 128, output_s=torch.empty(4, t, 4, dtype=torch.float16,
                                                                             device="meta"))
    with pytest.raises(ValueError, match=r"^output_s: expected shape \(4, 6, 4\) on meta, got \(4, 6, 8\) on meta$"):
        sglang.sglang_per_token_group_quant_fp8(x, 128, output_s=torch.empty(4, t, 8, device="meta"))
    with pytest.raises(TypeError, match=r"^out_q: expected dtype torch.float8_e4m3fn, got torch.int8"):
        sglang.sglang_per_token_group_quant_fp8(x, 128, output_q=torch.empty(4, t, h, dtype=torch.int8, device="meta"))


def test_sglang_fp8_argument_errors():
    with pytest.raises(AssertionError, match=r"^the last dimension of `x` cannot be divisible by `group_size`$"):
        sglang.sglang_per_token_group_quant_fp8(meta(4, 200), 128)
    with pytest.raises(AssertionError, match=r"^`x` is not contiguous$"):
        sglang.sglang_per_token_group_quant_fp8(meta(4, 512)[:, :256], 128)
    with pytest.raises(ValueError, match=r"^masked_m: expected shape \(3,\)"):
        sglang.sglang_per_token_group_quant_fp8(meta(3, 4, 256), 128, masked_m=torch.empty(2, dtype=torch.int32,
                                                                                          device="meta"))
    with pytest.raises(ValueError, match=r"^x: batched takes x = \(experts, M, K\), a 3-d tensor"):
        sglang.sglang_per_token_group_quant_fp8(meta(4, 256), 128, masked_m=torch.empty(4, dtype=torch.int32,
                                                                                       device="meta"))


@pytest.mark.parametrize("group,h", [(7168, 7168), (128, 128), (64, 64)])
def test_sglang_whole_row_is_not_implemented(group, h):
    with pytest.raises(NotImplementedError, match=rf"^kiln.compat.sglang.sglang_per_token_group_quant_fp8: whole-row "
                                                  rf"per-token quantization \(group_size == x.shape\[-1\] = {group}, "
                                                  r"SGLang's sglang_per_token_quant_fp8 path\) has no kiln kernel$"):
        sglang.sglang_per_token_group_quant_fp8(meta(4, h), group)
    if group == 7168:  # not the whole-row path (a flag is set), still no kiln kernel for the group
        with pytest.raises(NotImplementedError, match=r"group_size 7168 \(whole-row"):
            sglang.sglang_per_token_group_quant_fp8(meta(4, h), group, column_major_scales=True)
    else:  # the group path with a kiln group size runs
        q, scales = sglang.sglang_per_token_group_quant_fp8(meta(4, h), group, column_major_scales=True)
        assert scales.shape == (4, 1)


@pytest.mark.parametrize("group", [16, 256])
def test_sglang_group_sizes_without_a_kiln_kernel(group):
    with pytest.raises(NotImplementedError, match=rf"^kiln.compat.sglang.sglang_per_token_group_quant_fp8: "
                                                  rf"group_size {group} has no kiln kernel"):
        sglang.sglang_per_token_group_quant_fp8(meta(4, 1024), group, masked_m=None, column_major_scales=True)


def test_sglang_row_padded_is_not_implemented():
    with pytest.raises(NotImplementedError, match=r"^kiln.compat.sglang.sglang_per_token_group_quant_fp8_row_padded: "
                                                  r"the row-padded form \(rows aligned to row_alignment = 4, padding "
                                                  r"rows zero-filled\) has no kiln kernel$"):
        sglang.sglang_per_token_group_quant_fp8_row_padded(meta(5, 512), 128)
    with pytest.raises(AssertionError, match=r"^row-padded quant expects a 2D input$"):
        sglang.sglang_per_token_group_quant_fp8_row_padded(meta(2, 5, 512), 128)


def test_sglang_int8():
    q, scales = sglang.sglang_per_token_group_quant_int8(meta(3, 5, 384), 128)
    assert geometry(q) == layout((3, 5, 384), (1920, 384, 1), torch.int8)
    assert geometry(scales) == layout((3, 5, 3), (15, 3, 1), torch.float32)
    with pytest.raises(AssertionError):
        sglang.sglang_per_token_group_quant_int8(meta(3, 384), 128, dtype=torch.uint8)
    with pytest.raises(AssertionError, match=r"^`x` is not contiguous$"):
        sglang.sglang_per_token_group_quant_int8(meta(4, 512)[:, :256], 128)


# ---- torch.compile ----

@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_torch_compile_fullgraph(backend):
    torch._dynamo.reset()

    def f(x, x3, masked_m, output_s):
        q, s = vllm.per_token_group_quant_fp8(x, 128, column_major_scales=True, tma_aligned_scales=True)
        qp, sp = vllm.per_token_group_quant_fp8_packed_for_deepgemm(x, 128, use_ue8m0=True)
        q3, s3 = sglang.sglang_per_token_group_quant_fp8(x3, 128, masked_m=masked_m, output_s=output_s,
                                                         fuse_silu_and_mul=True)
        return q, s, sp, q3, s3

    output_s = torch.empty(4, 10, 2, device="meta")
    q, s, sp, q3, s3 = torch.compile(f, fullgraph=True, backend=backend)(
        meta(6, 256), meta(4, 10, 512), torch.empty(4, dtype=torch.int32, device="meta"), output_s)
    assert geometry(s) == layout((6, 2), (1, 8), torch.float32)
    assert geometry(sp) == layout((6, 1), (1, 8), torch.int32)
    assert q3.shape == (4, 10, 256) and s3.shape == (4, 10, 2)


# ---- install() ----

def fake_module(monkeypatch, name, **attrs):
    module = types.ModuleType(name)
    for attr, value in attrs.items():
        setattr(module, attr, value)
    monkeypatch.setitem(sys.modules, name, module)
    return module


def upstream(name, module, like):
    """A stand-in for an upstream function: `like`'s parameters, its own name and module."""
    def fn(*args, **kwargs):
        raise AssertionError(f"upstream {name} called")
    fn.__name__ = fn.__qualname__ = name
    fn.__module__ = module
    fn.__signature__ = inspect.signature(like)
    return fn


def drop(monkeypatch, package):
    for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
        monkeypatch.delitem(sys.modules, name)


@pytest.mark.parametrize("compat,package", [(vllm, "vllm"), (sglang, "sglang")])
def test_install_without_the_module(monkeypatch, compat, package):
    drop(monkeypatch, package)
    with pytest.warns(UserWarning, match=rf"^kiln.compat.{package}.install: {package} is not imported; "
                                         r"nothing replaced$"):
        assert compat.install() == []
    assert package not in sys.modules  # install() imports nothing


def test_vllm_install(monkeypatch):
    drop(monkeypatch, "vllm")
    where = "vllm.model_executor.layers.quantization.utils"
    fp8 = upstream("per_token_group_quant_fp8", f"{where}.fp8_utils", vllm.per_token_group_quant_fp8)
    packed = upstream("per_token_group_quant_fp8_packed_for_deepgemm", f"{where}.fp8_utils",
                      vllm.per_token_group_quant_fp8_packed_for_deepgemm)
    int8 = upstream("per_token_group_quant_int8", f"{where}.int8_utils", vllm.per_token_group_quant_int8)
    # Another vLLM function of the same name and other parameters (a row-major-only triton one).
    def other(x, group_size, eps=1e-10, dtype=None, out_q=None):
        pass
    other.__name__, other.__module__ = "per_token_group_quant_fp8", "vllm.kernels.triton_quant"
    fake_module(monkeypatch, "vllm")
    utils = fake_module(monkeypatch, f"{where}.fp8_utils", per_token_group_quant_fp8=fp8,
                        per_token_group_quant_fp8_packed_for_deepgemm=packed, unrelated=len)
    fake_module(monkeypatch, f"{where}.int8_utils", per_token_group_quant_int8=int8)
    user = fake_module(monkeypatch, "vllm.model_executor.layers.fused_moe.utils", per_token_group_quant_fp8=fp8,
                       quant=fp8)
    triton_quant = fake_module(monkeypatch, "vllm.kernels.triton_quant", per_token_group_quant_fp8=other)
    with pytest.warns(UserWarning, match=r"vllm.kernels.triton_quant.per_token_group_quant_fp8 takes \(x, group_size, "
                                         r"eps=1e-10, dtype=None, out_q=None\), not .*; left as it is"):
        replaced = vllm.install()
    moe = "vllm.model_executor.layers.fused_moe.utils"
    assert sorted(replaced) == sorted([
        f"{where}.fp8_utils.per_token_group_quant_fp8",
        f"{where}.fp8_utils.per_token_group_quant_fp8_packed_for_deepgemm",
        f"{where}.int8_utils.per_token_group_quant_int8", f"{moe}.per_token_group_quant_fp8", f"{moe}.quant"])
    assert utils.per_token_group_quant_fp8 is vllm.per_token_group_quant_fp8
    assert user.quant is user.per_token_group_quant_fp8 is vllm.per_token_group_quant_fp8
    assert sys.modules[f"{where}.int8_utils"].per_token_group_quant_int8 is vllm.per_token_group_quant_int8
    assert utils.unrelated is len and triton_quant.per_token_group_quant_fp8 is other
    # Once installed, a second call replaces nothing and says nothing more than the signature note.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert vllm.install() == []
    assert all("left as it is" in str(w.message) for w in caught)


def test_sglang_install(monkeypatch):
    drop(monkeypatch, "sglang")
    ops = "sglang.kernels.ops"
    fp8 = upstream("sglang_per_token_group_quant_fp8", f"{ops}.quantization.fp8_kernel",
                   sglang.sglang_per_token_group_quant_fp8)
    int8 = upstream("sglang_per_token_group_quant_int8", f"{ops}.quantization.int8_kernel",
                    sglang.sglang_per_token_group_quant_int8)
    padded = upstream("sglang_per_token_group_quant_fp8_row_padded", f"{ops}.quantization.fp8_kernel",
                      sglang.sglang_per_token_group_quant_fp8_row_padded)
    raw = upstream("_per_token_group_quant_8bit_raw", f"{ops}.quantization.fp8_kernel", lambda x, group_size: None)
    fake_module(monkeypatch, "sglang")
    # On CUDA fp8_kernel aliases per_token_group_quant_fp8 to sglang_per_token_group_quant_fp8.
    kernel = fake_module(monkeypatch, f"{ops}.quantization.fp8_kernel", sglang_per_token_group_quant_fp8=fp8,
                         per_token_group_quant_fp8=fp8, sglang_per_token_group_quant_fp8_row_padded=padded,
                         _per_token_group_quant_8bit_raw=raw)
    fake_module(monkeypatch, f"{ops}.quantization.int8_kernel", sglang_per_token_group_quant_int8=int8)
    # `from ...fp8_kernel import sglang_per_token_group_quant_fp8 as per_token_group_quant_fp8`
    ep = fake_module(monkeypatch, f"{ops}.moe.ep_moe_kernels", per_token_group_quant_fp8=fp8)
    moe = fake_module(monkeypatch, f"{ops}.moe.fused_moe_triton_kernels", sglang_per_token_group_quant_fp8=fp8,
                      sglang_per_token_group_quant_int8=int8)
    # Off CUDA the alias is another function, which stays.
    other = fake_module(monkeypatch, "sglang.srt.layers.quantization.fp8_kernel", per_token_group_quant_fp8=raw)
    replaced = sglang.install()
    assert sorted(replaced) == sorted([
        f"{ops}.quantization.fp8_kernel.sglang_per_token_group_quant_fp8",
        f"{ops}.quantization.fp8_kernel.per_token_group_quant_fp8",
        f"{ops}.quantization.int8_kernel.sglang_per_token_group_quant_int8",
        f"{ops}.moe.ep_moe_kernels.per_token_group_quant_fp8",
        f"{ops}.moe.fused_moe_triton_kernels.sglang_per_token_group_quant_fp8",
        f"{ops}.moe.fused_moe_triton_kernels.sglang_per_token_group_quant_int8"])
    assert kernel.per_token_group_quant_fp8 is sglang.sglang_per_token_group_quant_fp8
    assert ep.per_token_group_quant_fp8 is sglang.sglang_per_token_group_quant_fp8
    assert moe.sglang_per_token_group_quant_int8 is sglang.sglang_per_token_group_quant_int8
    assert kernel.sglang_per_token_group_quant_fp8_row_padded is padded  # kiln has no row-padded kernel
    assert kernel._per_token_group_quant_8bit_raw is raw and other.per_token_group_quant_fp8 is raw
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert sglang.install() == []


def test_install_with_nothing_to_replace(monkeypatch):
    drop(monkeypatch, "sglang")
    fake_module(monkeypatch, "sglang")
    with pytest.warns(UserWarning, match=r"^kiln.compat.sglang.install: none of sglang_per_token_group_quant_fp8, "
                                         r"sglang_per_token_group_quant_int8 found in the imported sglang modules; "
                                         r"nothing replaced$"):
        assert sglang.install() == []
