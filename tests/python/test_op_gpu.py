"""The op on a GPU (the H200: bench/device_python.sh): byte-exact against a reference written with
torch ops, torch.compile(fullgraph=True), CUDA graph capture and replay with fresh inputs, a side
stream, the device index, out_q, DLPack, opcheck, and batches of experts (MoE) with masked_m,
through the op's C++ kernels on PyTorch's stable ABI (kiln._kiln_ops)."""
import itertools

import pytest
import torch

import kiln
import torch_reference

pytestmark = pytest.mark.gpu


def reference(x, group=128, eps=1e-10):
    """The seed variant through tests/python/torch_reference.py (vLLM's numerics with torch ops)."""
    codes, scales = torch_reference.quantize(x, x.shape[1], group, "e4m3", eps=eps)
    return codes.view(torch.float8_e4m3fn), scales


def sample(m, k, device="cuda", seed=0):
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(m, k, device=device, generator=g)
    x = x * torch.exp2(torch.randint(-20, 20, (m, 1), device=device, generator=g).float())
    x = x.to(torch.bfloat16)
    if m > 0 and k >= 128:
        x[0, 0], x[0, 1], x[0, 2] = float("nan"), float("inf"), 0.0  # special values
    return x


def assert_exact(q, scales, x, eps=1e-10):
    q_ref, s_ref = reference(x, eps=eps)
    assert torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8)), "q differs from the torch reference"
    assert torch.equal(scales.view(torch.int32), s_ref.view(torch.int32)), "scales differ from the torch reference"


@pytest.mark.parametrize("m,k", [(1, 128), (7, 256), (128, 7168), (2048, 7168), (4096, 2048), (33, 18432)])
def test_byte_exact(m, k):
    x = sample(m, k)
    q, scales = kiln.per_token_group_quant_fp8(x)
    torch.cuda.synchronize()
    assert q.dtype == torch.float8_e4m3fn and scales.dtype == torch.float32 and scales.shape == (m, k // 128)
    assert_exact(q, scales, x)


def test_leading_dimensions():
    x = sample(24, 1024).view(2, 12, 1024)
    q, scales = kiln.per_token_group_quant_fp8(x)
    assert q.shape == (2, 12, 1024) and scales.shape == (2, 12, 8)
    assert_exact(q.view(24, 1024), scales.view(24, 8), x.view(24, 1024))


def test_out_q():
    x = sample(64, 512)
    out = torch.full((64, 512), 0x7F, dtype=torch.uint8, device="cuda").view(torch.float8_e4m3fn)
    version = out._version
    q, scales = kiln.per_token_group_quant_fp8(x, out_q=out)
    assert q is out and out._version > version
    assert_exact(out, scales, x)


def test_empty():
    q, scales = kiln.per_token_group_quant_fp8(torch.empty(0, 256, dtype=torch.bfloat16, device="cuda"))
    assert q.shape == (0, 256) and scales.shape == (0, 2)


def test_torch_compile_fullgraph():
    torch._dynamo.reset()

    @torch.compile(fullgraph=True)
    def f(x):
        return kiln.per_token_group_quant_fp8(x * 1)

    for m in (16, 300):
        x = sample(m, 1024, seed=m)
        q, scales = f(x)
        assert_exact(q, scales, x)


def test_cuda_graph_capture_and_replay_with_fresh_inputs():
    x = sample(256, 2048, seed=1)
    kiln.per_token_group_quant_fp8(x)  # warm-up on a side stream is torch's advice; kiln needs none
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        q, scales = kiln.per_token_group_quant_fp8(x)
    for seed in (2, 3, 4):
        x.copy_(sample(256, 2048, seed=seed))
        graph.replay()
        torch.cuda.synchronize()
        assert_exact(q, scales, x)


def test_capture_is_the_first_use_of_the_variant_in_a_fresh_process(tmp_path):
    # A new process whose first kiln call is inside a capture: the module is loaded (disk cache or
    # compile) during capture. Either it works byte-exact, or the error names kiln.warm.
    import subprocess
    import sys
    script = r'''
import torch, kiln
x = torch.randn(64, 1024, device="cuda").to(torch.bfloat16)
torch.cuda.synchronize()
g = torch.cuda.CUDAGraph()
try:
    with torch.cuda.graph(g):
        q, s = kiln.per_token_group_quant_fp8(x)
except RuntimeError as e:
    assert "kiln.warm(" in str(e), e
    print("REFUSED", e)
    raise SystemExit(0)
g.replay(); torch.cuda.synchronize()
groups = x.float().view(64, 8, 128)
sr = groups.abs().amax(dim=-1).clamp(min=1e-10) / torch.tensor(448.0, device="cuda")
qr = (groups / sr.unsqueeze(-1)).clamp(-448.0, 448.0).to(torch.float8_e4m3fn).view(64, 1024)
assert torch.equal(q.view(torch.uint8), qr.view(torch.uint8)) and torch.equal(s.view(torch.int32), sr.view(torch.int32))
print("REPLAYED")
'''
    import os
    runs = [("compile in capture", {"KILN_CACHE": "0"}),
            ("compile in capture, stored", {"KILN_CACHE_DIR": str(tmp_path / "cache")}),
            ("disk hit in capture", {"KILN_CACHE_DIR": str(tmp_path / "cache")})]
    for what, extra in runs:
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              env=dict(os.environ, **extra), timeout=300)
        print(what, done.stdout.strip(), done.stderr[-2000:])
        assert done.returncode == 0, done.stderr
        assert "REPLAYED" in done.stdout or "REFUSED" in done.stdout


def test_warm_then_capture():
    device = torch.cuda.current_device()
    assert kiln.warm(device=device) is True

    def loads():
        memory = kiln.cache_stats()["process"][device]["memory"]
        return memory["disk_hits"], memory["compiles"], memory["failures"]

    before = loads()
    x = sample(32, 256, seed=5)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        q, scales = kiln.per_token_group_quant_fp8(x)
        # Another eps is a call the seed kernels cannot take: the family module runs it, and warm
        # loaded that too, so the capture loads no module.
        q_eps, scales_eps = kiln.per_token_group_quant_fp8(x, eps=1e-6)
    assert loads() == before
    graph.replay()
    torch.cuda.synchronize()
    assert_exact(q, scales, x)
    assert_exact(q_eps, scales_eps, x, eps=1e-6)


def test_side_stream():
    x = sample(512, 4096, seed=6)
    fresh = sample(512, 4096, seed=11)
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        # The side stream sleeps, then writes fresh values: a kernel launched anywhere but on the
        # side stream would read the old ones.
        torch.cuda._sleep(100_000_000)
        x.copy_(fresh)
        q, scales = kiln.per_token_group_quant_fp8(x)
    side.synchronize()
    assert_exact(q, scales, fresh)


def test_device_index_is_honoured():
    count = torch.cuda.device_count()
    last = count - 1
    # With one GPU: the tensor's device is cuda:0 while the current device is cuda:0 too; with
    # two or more, the current device is 0 and the tensor lives on the last one.
    x = sample(128, 1024, device=f"cuda:{last}", seed=7)
    with torch.cuda.device(0):
        q, scales = kiln.per_token_group_quant_fp8(x)
    assert q.device == x.device and scales.device == x.device
    torch.cuda.synchronize(x.device)
    assert_exact(q, scales, x)
    assert last in kiln.cache_stats()["process"]


def test_dlpack_input():
    x = sample(16, 256, seed=8)

    class Foreign:  # an array from another framework: only the DLPack protocol
        def __init__(self, t):
            self.t = t

        def __dlpack__(self, stream=None, **kwargs):
            return self.t.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return self.t.__dlpack_device__()

    q, scales = kiln.per_token_group_quant_fp8(Foreign(x))
    torch.cuda.synchronize()
    assert_exact(q, scales, x)


VARIANTS = [v for v in itertools.product((torch.bfloat16, torch.float16, torch.float32), (32, 64, 128), ("e4m3", "int8"),
                                       ("row_major", "column_major", "column_major_tma", "ue8m0_packed"), (False, True),
                                       (False, True))
            if not (v[2] == "int8" and v[4]) and not (v[3] == "ue8m0_packed" and not v[4])]


@pytest.mark.parametrize("dtype,group,out,layout,ue8m0,silu", VARIANTS)
def test_every_variant_against_torch(dtype, group, out, layout, ue8m0, silu):
    m, k = 67, 1024
    g = torch.Generator(device="cuda").manual_seed(group + k)
    x = (torch.randn(m, 2 * k if silu else k, device="cuda", generator=g) * 3).to(dtype)
    if not silu:
        x[1, :group] = 0
        x[2, 5], x[3, 7], x[4, 9] = float("nan"), float("inf"), float("-inf")
    fn = kiln.per_token_group_quant_fp8 if out == "e4m3" else kiln.per_token_group_quant_int8
    q, scales = fn(x, group_size=group, column_major_scales=layout != "row_major",
                   tma_aligned_scales=layout in ("column_major_tma", "ue8m0_packed"), use_ue8m0=ue8m0,
                   pack_ue8m0_scales=layout == "ue8m0_packed", fuse_silu_and_mul=silu)
    torch.cuda.synchronize()
    codes, ref_scales = torch_reference.quantize(x, k, group, out, ue8m0, silu)
    assert q.shape == (m, k)
    if layout == "ue8m0_packed":
        got = torch.as_strided(scales, (scales.untyped_storage().nbytes() // 4,), (1,), 0).view(torch.uint8)
        scale_diff = (got.to(torch.int32) - torch_reference.packed_exponents(ref_scales).to(torch.int32)).abs()
    else:
        assert scales.shape == (m, k // group)
        scale_diff = (scales.contiguous().view(torch.int32) - ref_scales.view(torch.int32)).abs()
    code_diff = (q.view(torch.uint8).to(torch.int32) - codes.to(torch.int32)).abs()
    if silu:  # torch.exp against kiln's portable e^x: bounded, not equal
        assert int((code_diff != 0).sum()) <= code_diff.numel() // 1000 and int(scale_diff.max()) <= 8
    else:
        assert int(code_diff.max()) == 0 and int(scale_diff.max()) == 0


def test_the_ops_run_their_cpp_kernels_on_cuda():
    x = sample(96, 1024, seed=11)
    q, scales = torch.ops.kiln.per_token_group_quant(x, 128, 1e-10, "e4m3", "row_major", False, False)
    out = torch.full((96, 1024), 0x7F, dtype=torch.uint8, device="cuda").view(torch.float8_e4m3fn)
    out_scales = torch.ops.kiln.per_token_group_quant_out(x, out, 128, 1e-10, "e4m3", "row_major", False, False)
    torch.cuda.synchronize()
    assert_exact(q, scales, x)
    assert_exact(out, out_scales, x)
    eager_q, eager_scales = kiln.per_token_group_quant_fp8(x, column_major_scales=True, tma_aligned_scales=True)
    col_q, col_scales = torch.ops.kiln.per_token_group_quant(x, 128, 1e-10, "e4m3", "column_major_tma", False, False)
    assert (col_scales.shape, col_scales.stride()) == (eager_scales.shape, eager_scales.stride())
    assert col_scales.untyped_storage().nbytes() == eager_scales.untyped_storage().nbytes() == 4 * 8 * 96
    assert torch.equal(col_q.view(torch.uint8), eager_q.view(torch.uint8))
    assert torch.equal(col_scales.view(torch.int32), eager_scales.view(torch.int32))


def test_the_cpp_kernels_refuse_naming_the_argument():
    # The raw op's refusals are RuntimeErrors naming the argument; the public functions raise the
    # TypeError or ValueError they stand for.
    x = sample(8, 512, seed=12)
    op, op_out = torch.ops.kiln.per_token_group_quant, torch.ops.kiln.per_token_group_quant_out
    misaligned = torch.empty(8 * 512 + 4, dtype=torch.bfloat16, device="cuda")[4:].view(8, 512)
    with pytest.raises(RuntimeError, match=r"x: expected data 16-byte aligned"):
        op(misaligned, 128, 1e-10, "e4m3", "row_major", False, False)
    with pytest.raises(ValueError, match=r"^x: expected data 16-byte aligned"):
        kiln.per_token_group_quant_fp8(misaligned)
    with pytest.raises(RuntimeError, match=r"layout: expected one of .*, got 'foo'"):
        op(x, 128, 1e-10, "e4m3", "foo", False, False)
    with pytest.raises(RuntimeError, match=r"x: the last dimension \(K = 512\) must be a multiple of group_size"):
        op(x, 256, 1e-10, "e4m3", "row_major", False, False)
    with pytest.raises(TypeError, match=r"^out_q: expected dtype torch.float8_e4m3fn, got torch.int8"):
        kiln.per_token_group_quant_fp8(x, out_q=torch.empty(8, 512, dtype=torch.int8, device="cuda"))
    with pytest.raises(RuntimeError, match=r"out_q: expected a contiguous tensor"):
        op_out(x, torch.empty(512, 8, dtype=torch.float8_e4m3fn, device="cuda").t(), 128, 1e-10, "e4m3", "row_major",
               False, False)
    # A row-sliced x (a stride the kernel takes) runs.
    wide = sample(8, 1024, seed=13)
    q, scales = op(wide[:, :512], 128, 1e-10, "e4m3", "row_major", False, False)
    assert_exact(q, scales, wide[:, :512].contiguous())


LAYOUTS = {
    "row_major": {},
    "column_major": {"column_major_scales": True},
    "column_major_tma": {"column_major_scales": True, "tma_aligned_scales": True},
    "ue8m0_packed": {"column_major_scales": True, "tma_aligned_scales": True, "use_ue8m0": True,
                     "pack_ue8m0_scales": True},
}
POISON = 0x5A  # a byte no kernel writes everywhere: rows it must not touch keep it


def batch_sample(experts, t, width, dtype=torch.bfloat16, seed=20):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return (torch.randn(experts, t, width, device="cuda", generator=g) * 3).to(dtype)


def expert_scales(scales, e, layout):
    """Expert e's scales as the reference gives them: fp32 [T, G] (packed: the flat storage bytes
    of its block, which packed_exponents makes)."""
    block = scales[e]
    if layout == "ue8m0_packed":
        words, t4 = block.shape[1], block.stride(1)
        flat = torch.as_strided(scales, (words * t4,), (1,), scales.storage_offset() + e * scales.stride(0))
        return flat.contiguous().view(torch.uint8)
    return block.contiguous()


@pytest.mark.parametrize("silu", [False, True])
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("masked", [False, True])
def test_batched_against_torch(layout, masked, silu):
    experts, t, k, group = 5, 37, 512, 128
    ue8m0 = layout == "ue8m0_packed"
    x = batch_sample(experts, t, 2 * k if silu else k)
    counts = torch.tensor([37, 0, 5, 36, -3], dtype=torch.int32, device="cuda")
    flags = dict(group_size=group, fuse_silu_and_mul=silu, masked_m=counts if masked else None, batched=True,
                 **LAYOUTS[layout])
    # The scales are fresh each call: poison a block of their size and free it, so the caching
    # allocator most likely hands it to the call; the check of untouched scales runs where it did.
    nbytes = kiln.per_token_group_quant_fp8(x, **flags)[1].untyped_storage().nbytes()
    filler = torch.full((nbytes,), POISON, dtype=torch.uint8, device="cuda")
    poisoned_at = filler.data_ptr()
    del filler
    q = torch.full((experts, t, k), POISON, dtype=torch.uint8, device="cuda").view(torch.float8_e4m3fn)
    q, scales = kiln.per_token_group_quant_fp8(x, out_q=q, **flags)
    scales_poisoned_rows = masked and scales.untyped_storage().data_ptr() == poisoned_at
    torch.cuda.synchronize()
    limits = [max(0, min(int(c), t)) if masked else t for c in counts.tolist()]
    for e in range(experts):
        rows = limits[e]
        codes, ref = torch_reference.quantize(x[e], k, group, "e4m3", ue8m0, silu)
        got_q = q[e].view(torch.uint8)
        if rows:
            diff = (got_q[:rows].to(torch.int32) - codes[:rows].to(torch.int32)).abs()
            if silu:
                assert int((diff != 0).sum()) <= diff.numel() // 1000
            else:
                assert int(diff.max()) == 0, f"expert {e}: q differs"
        assert bool((got_q[rows:] == POISON).all()), f"expert {e}: rows from {rows} on were written"
        if layout != "ue8m0_packed":
            got = expert_scales(scales, e, layout)
            if rows and not silu:
                assert torch.equal(got[:rows].view(torch.int32), ref[:rows].view(torch.int32)), f"expert {e}"
            if scales_poisoned_rows and rows < t:
                assert bool((got[rows:].view(torch.int32) == POISON * 0x01010101).all()), f"expert {e}: scales"
        elif rows == t and not silu:
            assert torch.equal(expert_scales(scales, e, layout), torch_reference.packed_exponents(ref))


def test_batched_capture_replays_with_new_counts():
    experts, t, k = 4, 64, 1024
    x = batch_sample(experts, t, k, seed=21)
    counts = torch.full((experts,), t, dtype=torch.int32, device="cuda")
    assert kiln.warm(batched=True) is True
    kiln.per_token_group_quant_fp8(x, masked_m=counts)  # warm-up outside the capture
    torch.cuda.synchronize()
    q = torch.empty(experts, t, k, dtype=torch.float8_e4m3fn, device="cuda")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        _, scales = kiln.per_token_group_quant_fp8(x, out_q=q, masked_m=counts)
    for new in ([64, 0, 17, 3], [1, 64, 0, 40]):
        counts.copy_(torch.tensor(new, dtype=torch.int32, device="cuda"))
        q.view(torch.uint8).fill_(POISON)
        scales.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        for e, rows in enumerate(new):
            codes, ref = torch_reference.quantize(x[e], k, 128, "e4m3")
            assert torch.equal(q[e, :rows].view(torch.uint8), codes[:rows]), (new, e)
            assert bool((q[e, rows:].view(torch.uint8) == POISON).all()), (new, e)
            assert torch.equal(scales[e, :rows].view(torch.int32), ref[:rows].view(torch.int32)), (new, e)
            assert bool(scales[e, rows:].isnan().all()), (new, e)


def test_batched_torch_compile_fullgraph():
    torch._dynamo.reset()

    @torch.compile(fullgraph=True)
    def f(x, counts):
        return kiln.per_token_group_quant_fp8(x * 1, masked_m=counts, column_major_scales=True)

    x = batch_sample(3, 16, 512, seed=22)
    counts = torch.tensor([16, 9, 0], dtype=torch.int32, device="cuda")
    q, scales = f(x, counts)
    torch.cuda.synchronize()
    for e, rows in enumerate(counts.tolist()):
        codes, ref = torch_reference.quantize(x[e], 512, 128, "e4m3")
        assert torch.equal(q[e, :rows].view(torch.uint8), codes[:rows])
        assert torch.equal(scales[e, :rows].contiguous().view(torch.int32), ref[:rows].view(torch.int32))


def test_opcheck():
    # Why without test_schema: it runs the op's outputs through aten ops that have no float8 kernels
    # ("mul_cuda" not implemented for Float8_e4m3fn), whatever the op does.
    checks = ("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
    x = sample(32, 512, seed=9)
    torch.library.opcheck(torch.ops.kiln.per_token_group_quant.default, (x, 128, 1e-10, "e4m3", "row_major", False, False),
                          test_utils=checks)
    out = torch.empty(32, 512, dtype=torch.float8_e4m3fn, device="cuda")
    torch.library.opcheck(torch.ops.kiln.per_token_group_quant_out.default,
                          (x, out, 128, 1e-10, "e4m3", "row_major", False, False), test_utils=checks)


def test_dlpack_jax_bf16():
    import os
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # leave the GPU to torch too
    jnp = pytest.importorskip("jax.numpy")
    import jax
    x = sample(32, 512, seed=10)
    gpu = [d for d in jax.devices() if d.platform == "gpu"]
    if not gpu:
        pytest.skip("JAX sees no GPU")
    xj = jax.device_put(jnp.asarray(x.float().cpu().numpy()).astype(jnp.bfloat16), gpu[0])
    q, scales = kiln.per_token_group_quant_fp8(xj)
    torch.cuda.synchronize()
    assert_exact(q, scales, torch.from_dlpack(xj))


def test_dlpack_cupy_fp16():
    cupy = pytest.importorskip("cupy")
    xc = cupy.random.standard_normal((8, 256), dtype=cupy.float32).astype(cupy.float16)  # CuPy has no bf16
    q, scales = kiln.per_token_group_quant_fp8(xc)
    torch.cuda.synchronize()
    codes, ref_scales = torch_reference.quantize(torch.from_dlpack(xc), 256, 128, "e4m3")
    assert torch.equal(q.view(torch.uint8), codes) and torch.equal(scales.view(torch.int32), ref_scales.view(torch.int32))
