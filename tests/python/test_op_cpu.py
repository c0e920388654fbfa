"""The ops without a GPU: registration, the outputs' shapes, dtypes and strides for every layout
(meta tensors, FakeTensorMode, torch.compile(fullgraph=True)), and every error. Each test runs
twice: through the eager fast path (kiln._kiln_torch, which takes meta tensors and declines, for
the Python path to raise, whatever it does not accept) and through the Python path alone."""
import contextlib
import math

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode

import kiln

FP8, INT8 = kiln.per_token_group_quant_fp8, kiln.per_token_group_quant_int8
BUILT_FAST = kiln._fast
# What each call into the fast path returned, in the "fast" runs: (q, scales), or None (declined).
fast_results = []


@pytest.fixture(autouse=True, params=["fast", "python"])
def path(request, monkeypatch):
    fast_results.clear()
    if request.param == "python":
        monkeypatch.setattr(kiln, "_fast", None)
        return request.param
    if BUILT_FAST is None:
        pytest.skip("kiln._kiln_torch is not built (test_the_fast_path_is_built says why)")

    def spy(*args):
        result = BUILT_FAST(*args)
        fast_results.append(result)
        return result

    monkeypatch.setattr(kiln, "_fast", spy)
    return request.param


def test_the_fast_path_is_built():
    # tools/test-python and bench/device_python.sh build kiln._kiln_torch (torch is importable at
    # build time there); a wheel built without torch takes the Python path, which is not what runs
    # in production.
    assert BUILT_FAST is not None, ("kiln._kiln_torch is missing: pip install --no-build-isolation into an "
                                    "environment with torch builds it")


@pytest.mark.parametrize("name", ["per_token_group_quant", "per_token_group_quant_out"])
def test_the_ops_have_cpp_cuda_kernels(name):
    # The ops' CUDA kernels are C++ (python/ext/torch_op_kernels.cpp), every other backend the
    # Python body; the GPU tests run them, here the dispatcher shows where each came from.
    assert BUILT_FAST is not None, "kiln._kiln_torch is missing"
    table = torch._C._dispatch_dump(f"kiln::{name}")
    cuda = [line for line in table.splitlines() if line.startswith("CUDA")]
    assert len(cuda) == 1 and "torch_op_kernels.cpp" in cuda[0], table
    assert "CompositeExplicitAutograd" in table


def test_the_cpp_cuda_kernel_runs_the_python_body_where_it_declines():
    # Straight to the CUDA kernel with a meta x, which it declines (the dispatcher would send it to
    # the fake implementation): the Python body's error comes through as itself, and its result
    # (meta tensors, through the eager C++ call) as the op's.
    op = torch.ops.kiln.per_token_group_quant.default
    cuda = torch._C.DispatchKeySet(torch._C.DispatchKey.CUDA)
    x = meta(4, 256)
    with pytest.raises(ValueError, match=r"^layout: expected one of .*, got 'foo'$"):
        op.redispatch(cuda, x, 128, 1e-10, "e4m3", "foo", False, False)
    with pytest.raises(ValueError, match=r"^x: the last dimension \(K = 256\) must be a multiple of group_size = 100"):
        op.redispatch(cuda, x, 100, 1e-10, "e4m3", "row_major", False, False)
    q, scales = op.redispatch(cuda, x, 128, 1e-10, "e4m3", "column_major_tma", False, False)
    assert (q.shape, q.dtype, q.device.type) == ((4, 256), torch.float8_e4m3fn, "meta")
    assert (scales.shape, scales.stride()) == ((4, 2), (1, 4))
    out_scales = torch.ops.kiln.per_token_group_quant_out.default.redispatch(
        cuda, x, meta(4, 256, dtype=torch.float8_e4m3fn), 128, 1e-10, "e4m3", "row_major", False, False)
    assert out_scales.shape == (4, 2)


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
    assert "Tensor(a1!) out_q" in schema, schema  # out_q declared mutated
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
def test_fake_shapes_dtypes_strides(fn, qdtype, layout, group, xdtype, m, path):
    k = 4 * 128
    if fn is INT8 and LAYOUT_FLAGS[layout].get("use_ue8m0"):
        raises(ValueError, r"^use_ue8m0: int8 output takes fp32 scales", fn, meta(m, k, dtype=xdtype),
               group_size=group, **LAYOUT_FLAGS[layout])
        return
    q, scales = fn(meta(m, k, dtype=xdtype), group_size=group, **LAYOUT_FLAGS[layout])
    assert fast_results == ([] if path == "python" else [(q, scales)])
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
    fast_results.clear()
    with pytest.raises(kind, match=match):
        fn(*args, **kwargs)
    assert all(result is None for result in fast_results), "the fast path took a call the Python path refuses"


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
    assert fast_results in ([], [None])  # declined: the op ran through the dispatcher
    assert scales.stride() == (1, 4)


# Views and arguments where the fast path must take exactly what the Python path takes and make the
# same outputs, or decline so that the Python path raises its error.
AGREEMENT = {
    "dense": (lambda: meta(6, 512), {}),
    "3-d": (lambda: meta(2, 3, 256), {}),
    "rows sliced": (lambda: meta(4, 384)[:, :256], {}),
    "rows sliced, 3-d": (lambda: meta(2, 3, 384)[:, :, :256], {}),
    "rows sliced, not collapsing": (lambda: meta(2, 4, 384)[:, :3, :256], {}),
    "rows sliced, size-1 lead": (lambda: meta(1, 4, 384)[:, :, :256], {}),
    "one row of a wider tensor": (lambda: meta(4, 384)[1:2, :256], {}),
    "every other row": (lambda: meta(8, 256)[::2], {}),
    "expanded rows": (lambda: meta(1, 256).expand(4, 256), {}),
    "expanded rows, 3-d": (lambda: meta(1, 1, 256).expand(4, 1, 256), {}),
    "overlapping rows": (lambda: meta(4 * 256).as_strided((4, 256), (128, 1)), {}),
    "no rows": (lambda: meta(0, 256), {}),
    "no columns, sliced": (lambda: meta(4, 128)[:, :0], {}),
    "no columns, strided": (lambda: meta(4, 128)[::2, :0], {}),
    "misaligned offset, one row": (lambda: meta(2 * 256)[4:4 + 256].view(1, 256), {}),
    "aligned offset": (lambda: meta(3 * 256)[256:].view(2, 256), {}),
    "column-major, sliced rows": (lambda: meta(8, 384)[:, :256], {"column_major_scales": True}),
    "packed, 5 rows": (lambda: meta(5, 1024), {"column_major_scales": True, "tma_aligned_scales": True,
                                               "use_ue8m0": True, "pack_ue8m0_scales": True}),
    "fused SiLU, sliced": (lambda: meta(4, 640)[:, :512], {"fuse_silu_and_mul": True}),
    "int flags": (lambda: meta(4, 256), {"column_major_scales": 1, "tma_aligned_scales": 0}),
    "int eps": (lambda: meta(4, 256), {"eps": 1}),
    "huge int eps": (lambda: meta(4, 256), {"eps": 10 ** 400}),
    "eps past float32": (lambda: meta(4, 256), {"eps": 1e39}),
    "largest float32 eps": (lambda: meta(4, 256), {"eps": 3.4028234663852886e38}),
    "negative group": (lambda: meta(4, 256), {"group_size": -128}),
    "huge group": (lambda: meta(4, 256), {"group_size": 2 ** 80}),
    "dtype given": (lambda: meta(4, 256), {"dtype": torch.float8_e4m3fn}),
    "dtype of another kind": (lambda: meta(4, 256), {"dtype": "float8"}),
    "float64": (lambda: meta(4, 256, dtype=torch.float64), {}),
    "cpu": (lambda: torch.zeros(4, 256, dtype=torch.bfloat16), {}),
    "sparse": (lambda: torch.zeros(4, 256, dtype=torch.bfloat16).to_sparse(), {}),
    "parameter": (lambda: torch.nn.Parameter(meta(4, 256), requires_grad=False), {}),
    "out_q": (lambda: meta(4, 256), {"out_q": torch.empty(4, 256, dtype=torch.float8_e4m3fn, device="meta")}),
    "out_q on cpu": (lambda: meta(4, 256), {"out_q": torch.empty(4, 256, dtype=torch.float8_e4m3fn)}),
    "out_q 3-d for 2-d": (lambda: meta(4, 256), {"out_q": torch.empty(1, 4, 256, dtype=torch.float8_e4m3fn,
                                                                        device="meta")}),
}
# Valid calls the fast path leaves to the Python path: not a plain tensor.
PYTHON_PATH_ONLY = {"parameter"}


def outcome(fn, make, flags):
    try:
        q, scales = fn(make(), **flags)
    except Exception as error:  # noqa: BLE001: the type and message are what is compared
        return type(error), str(error)
    return [(tuple(t.shape), t.stride(), t.dtype, t.device.type, t.storage_offset(), t.untyped_storage().nbytes())
            for t in (q, scales)]


@pytest.mark.parametrize("case", list(AGREEMENT))
def test_fast_and_python_paths_agree(case, path, monkeypatch):
    if path == "python":
        return  # the case compares both paths itself
    make, flags = AGREEMENT[case]
    fast = outcome(FP8, make, flags)
    took = [result is not None for result in fast_results]
    monkeypatch.setattr(kiln, "_fast", None)
    assert fast == outcome(FP8, make, flags)
    if isinstance(fast, tuple):
        assert not any(took), "the fast path took a call the Python path refuses"
    else:
        assert took == ([] if case == "parameter" else [case not in PYTHON_PATH_ONLY])


def test_a_launch_failure_in_a_capture_names_kiln_warm(monkeypatch, path):
    if path == "python":
        return  # the fast path's rewording; the Python path's is _launch's, which calls the same
    from kiln import _torch_ops
    assert issubclass(_torch_ops._kiln_torch.LaunchError, RuntimeError)
    failure = _torch_ops._kiln_torch.LaunchError("no kernel")
    args = (failure, meta(4, 256), 64, True, True, True, True, False, "e4m3")
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    assert _torch_ops.fast_launch_failed(*args) is None  # the caller raises kiln's error as it is
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    with pytest.raises(RuntimeError, match=r"^kiln: variant per_token_group_quant-bf16-g64-e4m3-packed-ue8m0 could "
                       r"not be loaded on cuda:-1 during CUDA graph capture \(no kernel\); call kiln.warm\(device=-1, dtype=torch.bfloat16, "
                       r"group_size=64, output='e4m3', scales='ue8m0_packed', use_ue8m0=True, "
                       r"fuse_silu_and_mul=False\) before capturing") as raised:
        _torch_ops.fast_launch_failed(*args)
    assert raised.value.__cause__ is failure


def test_the_fast_call_refuses_a_wrong_argument_count(path):
    if BUILT_FAST is None:
        pytest.skip("kiln._kiln_torch is not built")
    with pytest.raises(TypeError, match=r"^_kiln_torch.quantize: expected 11 positional arguments"):
        BUILT_FAST(meta(4, 256))
    with pytest.raises(TypeError, match=r"the last argument \(int8\) must be a bool"):
        BUILT_FAST(meta(4, 256), 128, 1e-10, False, False, False, None, None, False, False, 0)
