"""The ops without a GPU: registration, the outputs' shapes, dtypes and strides for every layout,
batches of experts included (meta tensors, FakeTensorMode, torch.compile(fullgraph=True)), and every
error. On meta and fake tensors the ops run their fake implementations, which ask C++
(kiln._kiln.plan) for the checks and the geometry; a CPU tensor reaches the C++ kernel itself."""
import contextlib
import math

import re

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode

import kiln

FP8, INT8 = kiln.per_token_group_quant_fp8, kiln.per_token_group_quant_int8


@pytest.mark.parametrize("name", ["per_token_group_quant", "per_token_group_quant_out"])
def test_the_ops_kernels_are_the_stable_abi_module(name):
    # The kernels are C++ on PyTorch's stable ABI (python/ext/kiln_ops.cpp), registered at
    # CompositeExplicitAutograd; Meta is the Python fake, Autograd a fallthrough.
    table = torch._C._dispatch_dump(f"kiln::{name}")
    composite = [line for line in table.splitlines() if line.startswith("CompositeExplicitAutograd")]
    assert len(composite) == 1 and "kiln_ops.cpp" in composite[0], table
    assert "Meta" in table and "Autograd" in table


def test_no_python_fallback_or_capsule_remains():
    from kiln import _kiln, _torch_ops
    assert not hasattr(kiln, "_fast") and not hasattr(_torch_ops, "fast_quantize")
    assert not hasattr(_kiln, "_quant_entry")
    with pytest.raises(ModuleNotFoundError):
        __import__("kiln._kiln_torch")


def test_a_cpu_tensor_reaches_the_cpp_kernel():
    # The C++ kernel's refusal is a RuntimeError naming x (the stable ABI carries no other type);
    # the public functions raise it as the ValueError it stands for.
    x = torch.zeros(4, 256, dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match=r"x: expected a CUDA tensor, got one on cpu"):
        torch.ops.kiln.per_token_group_quant(x, 128, 1e-10, "e4m3", "row_major", False, False)
    with pytest.raises(ValueError, match=r"^x: expected a CUDA tensor, got one on cpu$") as raised:
        FP8(x)
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


def meta(*shape, dtype=torch.bfloat16):
    return torch.empty(*shape, dtype=dtype, device="meta")


def expected_scales(m, groups, layout):
    """(shape, strides, dtype) the issue's layouts give for a 2-d x of M rows."""
    m4 = (m + 3) // 4 * 4
    return {
        "row": ((m, groups), (groups, 1), torch.float32),
        "col": ((m, groups), (1, m), torch.float32),
        "tma": ((m, groups), (1, m4), torch.float32),
        "packed": ((m, (groups + 3) // 4), (1, m4), torch.int32),
    }[layout]


LAYOUT_FLAGS = {
    "row": {},
    "col": {"column_major_scales": True},
    "tma": {"column_major_scales": True, "tma_aligned_scales": True},
    "packed": {"column_major_scales": True, "tma_aligned_scales": True, "use_ue8m0": True, "pack_ue8m0_scales": True},
}


def test_ops_are_registered():
    assert hasattr(torch.ops.kiln, "per_token_group_quant")
    assert hasattr(torch.ops.kiln, "per_token_group_quant_out")
    schema = str(torch.ops.kiln.per_token_group_quant_out.default._schema)
    assert re.search(r"Tensor\(a\d*!\) out_q", schema), schema  # out_q declared mutated
    assert "!" not in str(torch.ops.kiln.per_token_group_quant.default._schema)


def test_outputs_have_no_gradient():
    # A quantizer is not differentiable: its outputs do not require grad even when x does, so a
    # backward through them is refused rather than silently giving x no gradient.
    x = meta(4, 256).requires_grad_()
    q, scales = torch.ops.kiln.per_token_group_quant(x, 128, 1e-10, "e4m3", "row_major", False, False)
    out_scales = torch.ops.kiln.per_token_group_quant_out(x, meta(4, 256, dtype=torch.float8_e4m3fn), 128, 1e-10,
                                                          "e4m3", "row_major", False, False)
    assert not q.requires_grad and not scales.requires_grad and not out_scales.requires_grad
    with pytest.raises(RuntimeError, match="does not require grad"):
        scales.sum().backward()


def test_the_op_bumps_out_q_version():
    # The op has no ADInplaceOrView kernel; its bodies and its fake bump out_q as that kernel would.
    out = meta(4, 256, dtype=torch.float8_e4m3fn)
    before = out._version
    torch.ops.kiln.per_token_group_quant_out(meta(4, 256), out, 128, 1e-10, "e4m3", "row_major", False, False)
    assert out._version > before


def test_op_dispatch_bench_prints_every_row():
    import pathlib
    import subprocess
    import sys
    script = pathlib.Path(__file__).resolve().parents[2] / "bench" / "op_dispatch.py"
    done = subprocess.run([sys.executable, str(script), "--calls", "2000", "--batch", "100", "--rounds", "2"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == 6, done.stdout  # header and five paths
    assert all(float(row.split("|")[2]) > 0 for row in rows[1:]), done.stdout


@pytest.mark.parametrize("fn,qdtype", [(FP8, torch.float8_e4m3fn), (INT8, torch.int8)])
@pytest.mark.parametrize("layout", list(LAYOUT_FLAGS))
@pytest.mark.parametrize("group", [32, 64, 128])
@pytest.mark.parametrize("xdtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("m", [1, 5, 8])
def test_fake_shapes_dtypes_strides(fn, qdtype, layout, group, xdtype, m):
    k = 4 * 128
    if fn is INT8 and LAYOUT_FLAGS[layout].get("use_ue8m0"):
        raises(ValueError, r"^use_ue8m0: int8 output takes fp32 scales", fn, meta(m, k, dtype=xdtype),
               group_size=group, **LAYOUT_FLAGS[layout])
        return
    q, scales = fn(meta(m, k, dtype=xdtype), group_size=group, **LAYOUT_FLAGS[layout])
    assert (q.shape, q.dtype, q.device.type) == ((m, k), qdtype, "meta")
    assert q.is_contiguous()
    shape, strides, sdtype = expected_scales(m, k // group, layout)
    assert (tuple(scales.shape), scales.stride(), scales.dtype) == (shape, strides, sdtype)


def test_fake_row_major_keeps_leading_dimensions():
    q, scales = FP8(meta(2, 3, 256), group_size=64)
    assert q.shape == (2, 3, 256) and scales.shape == (2, 3, 4) and scales.is_contiguous()


def test_fake_out_q_is_returned_as_q():
    out = torch.empty(4, 256, dtype=torch.float8_e4m3fn, device="meta")
    q, scales = FP8(meta(4, 256), out_q=out)
    assert q is out and scales.shape == (4, 2)


def test_fake_tensor_mode_on_cuda_device():
    with FakeTensorMode():
        x = torch.empty(7, 512, dtype=torch.bfloat16, device="cuda")
        q, scales = FP8(x, column_major_scales=True, tma_aligned_scales=True)
        assert q.device.type == "cuda" and q.dtype == torch.float8_e4m3fn
        assert scales.shape == (7, 4) and scales.stride() == (1, 8)


# aot_eager: AOTAutograd functionalizes the graph, the out_q op through auto_functionalized.
COMPILE_BACKENDS = ["eager", "aot_eager"]


@pytest.mark.parametrize("backend", COMPILE_BACKENDS)
def test_torch_compile_fullgraph_traces_without_breaks(backend):
    torch._dynamo.reset()

    def f(x):
        q, scales = FP8(x * 2, group_size=128, column_major_scales=True)
        return q, scales + 1

    q, scales = torch.compile(f, fullgraph=True, backend=backend)(meta(16, 1024))
    assert q.shape == (16, 1024) and q.dtype == torch.float8_e4m3fn
    assert scales.shape == (16, 8)


@pytest.mark.parametrize("backend", COMPILE_BACKENDS)
def test_torch_compile_fullgraph_with_out_q(backend):
    torch._dynamo.reset()

    def f(x, out):
        return INT8(x, out_q=out)

    out = torch.empty(8, 256, dtype=torch.int8, device="meta")
    q, scales = torch.compile(f, fullgraph=True, backend=backend)(meta(8, 256), out)
    assert q is out and scales.shape == (8, 2)


# Every error names its argument.
def raises(kind, match, fn, *args, **kwargs):
    with pytest.raises(kind, match=match):
        fn(*args, **kwargs)


def test_cpu_tensor():
    raises(ValueError, r"^x: expected a CUDA tensor, got one on cpu", FP8, torch.zeros(4, 128, dtype=torch.bfloat16))


def test_dlpack_array_goes_through_the_same_checks():
    import numpy  # tools/test-python installs it: an array that only speaks DLPack, on the CPU
    array = numpy.zeros((4, 128), dtype=numpy.float32)
    raises(ValueError, r"^x: expected a CUDA tensor, got one on cpu", FP8, array)


def test_not_an_array():
    raises(TypeError, r"^x: expected a torch.Tensor or an object with __dlpack__, got list", FP8, [[1.0] * 128])


@pytest.mark.parametrize("dtype", [torch.float64, torch.int32, torch.float8_e4m3fn])
def test_wrong_dtype(dtype):
    raises(TypeError, r"^x: expected dtype bfloat16, float16 or float32, got torch\.", FP8, meta(4, 128, dtype=dtype))


def test_zero_dimensional():
    raises(ValueError, r"^x: expected at least one dimension", FP8, torch.empty((), dtype=torch.bfloat16, device="meta"))


def test_last_dimension_not_contiguous():
    raises(ValueError, r"^x: expected a contiguous last dimension \(stride 1\), got strides \(1, 256\)",
           FP8, meta(256, 256).t())


def test_k_not_a_multiple_of_the_group():
    raises(ValueError, r"^x: the last dimension \(K = 200\) must be a multiple of group_size = 128", FP8, meta(4, 200))
    raises(ValueError, r"K = 96\) must be a multiple of group_size = 64", INT8, meta(4, 96), group_size=64)


def test_misaligned_storage_offset():
    x = meta(4 * 128 + 1)[1:].view(4, 128)
    raises(ValueError, r"^x: expected data 16-byte aligned, got address 0x2 ", FP8, x)


def test_misaligned_rows():
    x = meta(4, 136)[:, :128]  # rows 272 bytes apart: 16-byte aligned, accepted
    FP8(x)
    x = meta(4, 132, dtype=torch.float32)[:, :128]  # rows 528 bytes apart, accepted
    FP8(x)
    x = meta(4, 130)[:, :128]  # rows 260 bytes apart
    raises(ValueError, r"^x rows: expected data 16-byte aligned", FP8, x)


def test_leading_dimensions_that_do_not_collapse():
    x = meta(4, 8, 128).permute(1, 0, 2)
    raises(ValueError, r"^x: expected leading dimensions that collapse into rows of one stride", FP8, x)


@pytest.mark.parametrize("make,width,flags", [
    (lambda: meta(1, 256).expand(4, 256), 256, {}),
    (lambda: meta(1, 1, 256).expand(4, 1, 256), 256, {}),
    (lambda: meta(1, 512).expand(4, 512), 512, {"fuse_silu_and_mul": True}),  # [gate, up]: rows of 2K
    (lambda: meta(4 * 256).as_strided((4, 256), (128, 1)), 256, {}),
], ids=["expanded", "expanded 3-d", "expanded, fused SiLU", "half-overlapping"])
def test_overlapping_rows(make, width, flags):
    # The library reads a row stride of 0 as dense: an expanded x would be read far past its one row.
    raises(ValueError, rf"^x: expected rows that do not overlap \(a row stride of at least {width} elements\), got "
           r"row stride \d+ .*call \.contiguous\(\) first", FP8, make(), **flags)


def test_column_major_needs_2d():
    raises(ValueError, r"^x: column-major scales \(column_major\) need a 2-d x", FP8, meta(2, 2, 128),
           column_major_scales=True)


@pytest.mark.parametrize("group", [0, 16, 96, 256])
def test_group_size_value(group):
    raises(ValueError, r"^group_size: expected one of \(32, 64, 128\), got " + str(group), FP8, meta(4, 256),
           group_size=group)


@pytest.mark.parametrize("group", ["128", 128.0, True])
def test_group_size_type(group):
    raises(TypeError, r"^group_size: expected an int in \(32, 64, 128\)", FP8, meta(4, 256), group_size=group)


# Past float32's largest value eps would become inf in the kernel (and in C++ a conversion with
# undefined behaviour); 2 ** 128 is the first integer past it.
@pytest.mark.parametrize("eps", [0, -1e-10, math.nan, math.inf, 1e39, 2 ** 128, 10 ** 400])
def test_eps_value(eps):
    raises(ValueError, r"^eps: expected a float in 0 < eps <= 3\.4028234663852886e\+38 \(the largest float32\), got ",
           FP8, meta(4, 128), eps=eps)


def test_eps_type():
    raises(TypeError, r"^eps: expected a float > 0, got str", FP8, meta(4, 128), eps="small")


def test_tma_without_column_major():
    raises(ValueError, r"^tma_aligned_scales: .* needs column_major_scales=True", FP8, meta(4, 128),
           tma_aligned_scales=True)


def test_packing_needs_its_flags():
    raises(ValueError, r"^pack_ue8m0_scales: .* needs use_ue8m0=True, column_major_scales=True and "
           r"tma_aligned_scales=True", FP8, meta(4, 128), pack_ue8m0_scales=True, column_major_scales=True)


FLAGS = ["column_major_scales", "tma_aligned_scales", "use_ue8m0", "pack_ue8m0_scales", "fuse_silu_and_mul"]


@pytest.mark.parametrize("flag", FLAGS)
@pytest.mark.parametrize("value,shown", [(1, "int"), (0, "int"), ("yes", "str"), (None, "NoneType")])
def test_flags_are_bools(flag, value, shown):
    raises(TypeError, rf"^{flag}: expected a bool, got {shown}$", FP8, meta(4, 256), **{flag: value})


def test_vllm_positional_dtype_is_not_a_flag():
    # vLLM's order is (x, group_size, eps, dtype, column_major_scales, ...); kiln's fourth is
    # column_major_scales, which used to take torch.int8 as True and return column-major scales.
    raises(TypeError, r"^column_major_scales: expected a bool, got torch.int8 \(dtype is a keyword argument here\)$",
           INT8, meta(4, 256), 128, 1e-10, torch.int8)


def test_dtype_argument():
    FP8(meta(4, 128), dtype=torch.float8_e4m3fn)
    INT8(meta(4, 128), dtype=torch.int8)
    raises(TypeError, r"^dtype: expected None or torch.float8_e4m3fn, got torch.int8", FP8, meta(4, 128),
           dtype=torch.int8)
    raises(TypeError, r"^dtype: expected None or torch.int8, got torch.float8_e4m3fn", INT8, meta(4, 128),
           dtype=torch.float8_e4m3fn)


def test_out_q_errors():
    x = meta(4, 256)
    raises(TypeError, r"^out_q: expected a torch.Tensor or an object with __dlpack__, got list", FP8, x, out_q=[0])
    raises(TypeError, r"^out_q: expected dtype torch.float8_e4m3fn, got torch.int8", FP8, x,
           out_q=torch.empty(4, 256, dtype=torch.int8, device="meta"))
    raises(ValueError, r"^out_q: expected shape \(4, 256\), got \(4, 128\)", FP8, x,
           out_q=torch.empty(4, 128, dtype=torch.float8_e4m3fn, device="meta"))
    raises(ValueError, r"^out_q: expected a contiguous tensor", FP8, x,
           out_q=torch.empty(256, 4, dtype=torch.float8_e4m3fn, device="meta").t())
    raises(ValueError, r"^out_q: expected a tensor on meta \(x's device\), got one on cpu", FP8, x,
           out_q=torch.empty(4, 256, dtype=torch.float8_e4m3fn))
    raises(ValueError, r"^out_q: expected data 16-byte aligned", FP8, x,
           out_q=torch.empty(4 * 256 + 8, dtype=torch.float8_e4m3fn, device="meta")[8:].view(4, 256))


def test_warm_errors():
    raises(TypeError, r"^dtype: expected torch.bfloat16, torch.float16 or torch.float32, got torch.int8",
           kiln.warm, device=0, dtype=torch.int8)
    raises(ValueError, r"^output: expected one of \('e4m3', 'int8'\), got 'fp4'", kiln.warm, device=0, output="fp4")
    raises(ValueError, r"^scales: expected one of .*, got 'diagonal'", kiln.warm, device=0, scales="diagonal")
    raises(ValueError, r"^group_size: expected one of", kiln.warm, device=0, group_size=100)
    raises(TypeError, r"^use_ue8m0: expected a bool, got int", kiln.warm, device=0, use_ue8m0=1)
    raises(TypeError, r"^fuse_silu_and_mul: expected a bool, got str", kiln.warm, device=0, fuse_silu_and_mul="no")


def raw_op(name, x, output="e4m3", layout="row_major"):
    if name == "per_token_group_quant":
        return torch.ops.kiln.per_token_group_quant(x, 128, 1e-10, output, layout, False, False)
    out_q = torch.empty(x.shape, dtype=torch.float8_e4m3fn, device=x.device)
    return torch.ops.kiln.per_token_group_quant_out(x, out_q, 128, 1e-10, output, layout, False, False)


@pytest.mark.parametrize("fake", [False, True], ids=["meta", "FakeTensorMode"])
@pytest.mark.parametrize("name", ["per_token_group_quant", "per_token_group_quant_out"])
def test_raw_ops_check_their_strings(name, fake):
    # The schemas take any str: "fp8" used to be a KeyError, and "foo" made the fake return packed
    # int32 scales where the real op raised AttributeError.
    with FakeTensorMode() if fake else contextlib.nullcontext():
        x = torch.empty(4, 256, dtype=torch.bfloat16, device="cuda" if fake else "meta")
        with pytest.raises(ValueError, match=r"^output: expected one of \('e4m3', 'int8'\), got 'fp8'$"):
            raw_op(name, x, output="fp8")
        with pytest.raises(ValueError, match=r"^layout: expected one of \('row_major', 'column_major', "
                           r"'column_major_tma', 'ue8m0_packed'\), got 'foo'$"):
            raw_op(name, x, layout="foo")


def test_the_extension_refuses_what_the_library_refuses_as_value_errors():
    # Straight to the extension: without a GPU the op never reaches it.
    from kiln import _kiln, _variant
    v = _variant.variant("float16", 64, "int8", "column_major_tma", False)
    with pytest.raises(ValueError, match=r"^invalid argument 'x': expected a device pointer, got null"):
        _kiln.quantize(0, v, 0, 0, 0, 4, 128, 0, 1e-10, 0)
    with pytest.raises(ValueError, match=r"^invalid argument 'k': expected a multiple of the group \(64\), got 100"):
        _kiln.quantize(0, v, 0, 0, 0, 4, 100, 0, 1e-10, 0)
    with pytest.raises(ValueError, match=r"^invalid argument 'x_row_stride'"):
        _kiln.quantize(0, v, 0x10000, 0x20000, 0x30000, 4, 128, 130, 1e-10, 0)
    impossible = _kiln.QuantVariant(input=_kiln.QuantInput.bf16, group=128, output=_kiln.QuantOutput.e4m3,
                                    scales=_kiln.ScaleLayout.ue8m0_packed, ue8m0=False, silu_and_mul=False)
    with pytest.raises(ValueError, match=r"^impossible variant of per_token_group_quant: parameter 'scales'"):
        _kiln.warm(0, impossible)
    if torch.cuda.is_available():  # the H200 run: the variant compiles or loads
        assert _kiln.warm(0, v) is True
    else:  # a machine without a GPU: not available, said plainly
        assert _kiln.warm(0, v) is False
        with pytest.raises(RuntimeError, match=r"variant per_token_group_quant-fp16-g64-int8-col_tma is not available"):
            _kiln.quantize(0, v, 0x10000, 0x20000, 0x30000, 4, 128, 0, 1e-10, 0)
    assert str(v) == "per_token_group_quant-fp16-g64-int8-col_tma"


def test_int8_has_no_ue8m0_scales():
    x = torch.empty(4, 256, dtype=torch.bfloat16, device="meta")
    raises(ValueError, r"^use_ue8m0: int8 output takes fp32 scales", kiln.per_token_group_quant_int8, x,
           use_ue8m0=True)


@pytest.mark.parametrize("layout", ["row_major", "column_major"])
def test_fused_silu_and_mul_halves_the_last_dimension(layout):
    x = torch.empty(6, 512, dtype=torch.bfloat16, device="meta")
    q, scales = kiln.per_token_group_quant_fp8(x, group_size=64, column_major_scales=layout != "row_major",
                                               fuse_silu_and_mul=True)
    assert q.shape == (6, 256) and q.dtype == torch.float8_e4m3fn
    assert scales.shape == (6, 4)
    raises(ValueError, r"^x: fuse_silu_and_mul takes x = \[gate, up\] with an even last dimension",
           kiln.per_token_group_quant_fp8, torch.empty(6, 129 * 2 + 1, dtype=torch.bfloat16, device="meta"),
           fuse_silu_and_mul=True)
    raises(ValueError, r"after halving for fuse_silu_and_mul", kiln.per_token_group_quant_fp8,
           torch.empty(6, 2 * 96, dtype=torch.bfloat16, device="meta"), fuse_silu_and_mul=True)


def test_out_q_version_is_bumped():
    # As the op's mutation annotation would: autograd sees out_q changed.
    out = torch.empty(4, 256, dtype=torch.float8_e4m3fn, device="meta")
    before = out._version
    FP8(meta(4, 256), out_q=out)
    assert out._version > before


def test_a_dispatch_mode_sees_the_op():
    seen = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    with Record():
        q, scales = FP8(meta(4, 256), column_major_scales=True)
    assert "kiln.per_token_group_quant.default" in seen
    assert scales.stride() == (1, 4)


# Views and arguments the checks take (the outputs' geometry) or refuse (the error), on meta
# tensors through the fake: each case's outcome as it is now, so a change of the C++ plan shows.
VIEWS = {
    "dense": (lambda: meta(6, 512), {}, ((6, 512), (6, 4))),
    "3-d": (lambda: meta(2, 3, 256), {}, ((2, 3, 256), (2, 3, 2))),
    "rows sliced": (lambda: meta(4, 384)[:, :256], {}, ((4, 256), (4, 2))),
    "rows sliced, 3-d": (lambda: meta(2, 3, 384)[:, :, :256], {}, ((2, 3, 256), (2, 3, 2))),
    "rows sliced, size-1 lead": (lambda: meta(1, 4, 384)[:, :, :256], {}, ((1, 4, 256), (1, 4, 2))),
    "one row of a wider tensor": (lambda: meta(4, 384)[1:2, :256], {}, ((1, 256), (1, 2))),
    "every other row": (lambda: meta(8, 256)[::2], {}, ((4, 256), (4, 2))),
    "no rows": (lambda: meta(0, 256), {}, ((0, 256), (0, 2))),
    "no columns, strided": (lambda: meta(4, 128)[::2, :0], {}, ((2, 0), (2, 0))),
    "aligned offset": (lambda: meta(3 * 256)[256:].view(2, 256), {}, ((2, 256), (2, 2))),
    "packed, 5 rows": (lambda: meta(5, 1024), LAYOUT_FLAGS["packed"], ((5, 1024), (5, 2))),
    "fused SiLU, sliced": (lambda: meta(4, 640)[:, :512], {"fuse_silu_and_mul": True}, ((4, 256), (4, 2))),
    "int eps": (lambda: meta(4, 256), {"eps": 1}, ((4, 256), (4, 2))),
    "rows sliced, not collapsing": (lambda: meta(2, 4, 384)[:, :3, :256], {}, (ValueError, "collapse")),
    "expanded rows": (lambda: meta(1, 256).expand(4, 256), {}, (ValueError, "do not overlap")),
    "misaligned offset, one row": (lambda: meta(2 * 256)[4:4 + 256].view(1, 256), {}, (ValueError, "aligned")),
    "huge group": (lambda: meta(4, 256), {"group_size": 2 ** 80}, (ValueError, "group_size")),
    "float64": (lambda: meta(4, 256, dtype=torch.float64), {}, (TypeError, "torch.float64")),
    "sparse": (lambda: torch.zeros(4, 256, dtype=torch.bfloat16).to_sparse(), {}, (ValueError, "CUDA tensor")),
    "parameter": (lambda: torch.nn.Parameter(meta(4, 256), requires_grad=False), {}, ((4, 256), (4, 2))),
    "out_q 3-d for 2-d": (lambda: meta(4, 256), {"out_q": torch.empty(1, 4, 256, dtype=torch.float8_e4m3fn,
                                                                        device="meta")}, (ValueError, "out_q")),
}


@pytest.mark.parametrize("case", list(VIEWS))
def test_views(case):
    make, flags, expected = VIEWS[case]
    if isinstance(expected[0], type):
        with pytest.raises(expected[0], match=expected[1]):
            FP8(make(), **flags)
        return
    q, scales = FP8(make(), **flags)
    assert (tuple(q.shape), tuple(scales.shape)) == expected


def test_a_launch_failure_in_a_capture_names_kiln_warm(monkeypatch):
    from kiln import _torch_ops
    failure = RuntimeError("no kernel")
    args = (failure, meta(4, 256), 64, "e4m3", "ue8m0_packed", True, False)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    assert _torch_ops.reword_in_capture(*args) is None  # the caller raises kiln's error as it is
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    with pytest.raises(RuntimeError, match=r"^kiln: variant per_token_group_quant-bf16-g64-e4m3-packed-ue8m0 could "
                       r"not be loaded on cuda:-1 during CUDA graph capture \(no kernel\); call kiln.warm\(device=-1, "
                       r"dtype=torch.bfloat16, group_size=64, output='e4m3', scales='ue8m0_packed', use_ue8m0=True, "
                       r"fuse_silu_and_mul=False\) before capturing") as raised:
        _torch_ops.reword_in_capture(*args)
    assert raised.value.__cause__ is failure


def expected_batched_scales(experts, t, groups, layout):
    """(shape, strides, storage elements, dtype) of a batch's scales: SGLang's layouts."""
    t4 = (t + 3) // 4 * 4
    words = (groups + 3) // 4
    return {
        # Why torch's own strides: a contiguous tensor with a zero-size dimension strides it as size 1.
        "row": ((experts, t, groups), torch.empty(experts, t, groups).stride(), experts * t * groups, torch.float32),
        "col": ((experts, t, groups), (groups * t, 1, t), experts * groups * t, torch.float32),
        "tma": ((experts, t, groups), (groups * t4, 1, t4), experts * groups * t4, torch.float32),
        "packed": ((experts, t, words), (words * t4, 1, t4), experts * words * t4, torch.int32),
    }[layout]


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("silu", [False, True])
@pytest.mark.parametrize("layout", list(LAYOUT_FLAGS))
@pytest.mark.parametrize("experts,t,groups", [(1, 1, 1), (3, 5, 4), (8, 7, 5), (2, 0, 2)])
def test_batched_shapes_dtypes_strides(experts, t, groups, layout, silu, masked):
    k = 128 * groups
    x = meta(experts, t, 2 * k if silu else k)
    masked_m = torch.empty(experts, dtype=torch.int32, device="meta") if masked else None
    q, scales = FP8(x, fuse_silu_and_mul=silu, masked_m=masked_m, batched=True, **LAYOUT_FLAGS[layout])
    assert (tuple(q.shape), q.dtype, q.is_contiguous()) == ((experts, t, k), torch.float8_e4m3fn, True)
    shape, strides, storage, dtype = expected_batched_scales(experts, t, groups, layout)
    assert (tuple(scales.shape), scales.stride(), scales.dtype) == (shape, strides, dtype)
    assert scales.untyped_storage().nbytes() == 4 * storage


def test_masked_m_implies_batched():
    q, scales = INT8(meta(4, 6, 256), group_size=64, masked_m=torch.empty(4, dtype=torch.int32, device="meta"),
                     column_major_scales=True)
    assert q.shape == (4, 6, 256) and (tuple(scales.shape), scales.stride()) == ((4, 6, 4), (24, 1, 6))


def test_batched_raw_op_and_out_q():
    x = meta(2, 8, 512)
    out = torch.empty(2, 8, 512, dtype=torch.float8_e4m3fn, device="meta")
    scales = torch.ops.kiln.per_token_group_quant_out(x, out, 128, 1e-10, "e4m3", "column_major_tma", False, False,
                                                      True, None)
    assert (tuple(scales.shape), scales.stride()) == ((2, 8, 4), (32, 1, 8))
    q, scales = FP8(x, out_q=out, batched=True)
    assert q is out and scales.shape == (2, 8, 4)


def test_batched_strided_x():
    # Rows of a wider buffer and experts further apart than their rows: strides the kernel takes.
    q, scales = FP8(meta(3, 6, 640)[:, :, :512], batched=True)
    assert q.shape == (3, 6, 512) and scales.shape == (3, 6, 4)
    q, scales = FP8(meta(3, 8, 512)[:, :6], batched=True)
    assert q.shape == (3, 6, 512)


@pytest.mark.parametrize("backend", COMPILE_BACKENDS)
def test_torch_compile_fullgraph_batched(backend):
    torch._dynamo.reset()

    def f(x, masked_m):
        return FP8(x, masked_m=masked_m, column_major_scales=True, tma_aligned_scales=True)

    masked_m = torch.empty(4, dtype=torch.int32, device="meta")
    q, scales = torch.compile(f, fullgraph=True, backend=backend)(meta(4, 10, 256), masked_m)
    assert q.shape == (4, 10, 256) and (tuple(scales.shape), scales.stride()) == ((4, 10, 2), (24, 1, 12))


def test_batched_errors():
    x = meta(2, 4, 256)
    raises(ValueError, r"^x: batched takes x = \(experts, M, K\), a 3-d tensor, got shape \(4, 256\)$", FP8,
           meta(4, 256), batched=True)
    raises(ValueError, r"^masked_m: takes a batch of experts \(batched=True", FP8, x,
           masked_m=torch.empty(2, dtype=torch.int32, device="meta"), batched=False)
    raises(TypeError, r"^masked_m: expected dtype torch.int32, got torch.int64$", FP8, x,
           masked_m=torch.empty(2, dtype=torch.int64, device="meta"))
    raises(ValueError, r"^masked_m: expected shape \(2,\) \(one row count per expert\), got \(3,\)$", FP8, x,
           masked_m=torch.empty(3, dtype=torch.int32, device="meta"))
    raises(ValueError, r"^masked_m: expected a tensor on meta \(x's device\), got one on cpu$", FP8, x,
           masked_m=torch.empty(2, dtype=torch.int32))
    raises(ValueError, r"^masked_m: expected a contiguous tensor", FP8, x,
           masked_m=torch.empty(4, dtype=torch.int32, device="meta")[::2])
    raises(TypeError, r"^batched: expected a bool, got int$", FP8, x, batched=1)
    raises(ValueError, r"^x: expected experts that do not overlap \(an expert stride of at least 1024 elements\)",
           FP8, meta(1, 4, 256).expand(2, 4, 256), batched=True)
    raises(ValueError, r"^x: expected rows that do not overlap", FP8, meta(2, 1, 256).expand(2, 4, 256), batched=True)
    raises(ValueError, r"^x rows: expected data 16-byte aligned", FP8, meta(2, 4, 260)[:, :, :256], batched=True)
    raises(ValueError, r"^invalid argument 'experts'", FP8, meta(65536, 1, 128), batched=True)


def test_plan_is_what_the_fake_asks():
    # One C++ plan for fakes and kernels: the geometry of a call straight from kiln._kiln.plan.
    from kiln import _kiln
    facts = ("torch.bfloat16", "meta", True, (3, 5, 1024), (5 * 1024, 1024, 1), 0, 2)
    q_shape, q_dtype, storage, shape, strides, dtype, view = _kiln.plan(facts, None, None, 128, 1e-10, "e4m3",
                                                                        "ue8m0_packed", True, False, True)
    assert (q_shape, q_dtype) == ([3, 5, 1024], "torch.float8_e4m3fn")
    assert (storage, shape, strides, dtype, view) == (3 * 2 * 8, [3, 5, 2], [16, 1, 8], "torch.int32", True)
