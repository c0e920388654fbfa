"""The quantizer as PyTorch custom ops (torch.ops.kiln.*), with fake implementations so
torch.compile(fullgraph=True) traces them, and the vLLM-named functions over them.

Two ops, because a custom op's output may not alias its input: `per_token_group_quant` returns a
new (q, scales); `per_token_group_quant_out` writes q into `out_q` (declared mutated) and returns
scales."""

import importlib
import warnings
from typing import Optional, Tuple

import torch

from . import _kiln, _variant

try:
    # Why not `from . import _kiln_torch`: for a missing submodule of a package being imported, that
    # raises a plain ImportError ("cannot import name ... circular import"), never ModuleNotFoundError.
    _kiln_torch = importlib.import_module("._kiln_torch", __package__)
except ModuleNotFoundError:  # built without torch (e.g. an isolated build): the Python path below
    _kiln_torch = None
except ImportError as error:  # built against another torch
    warnings.warn(f"kiln: the C++ eager path (kiln._kiln_torch) does not load ({error}); using the Python path "
                  f"(18 us a call on the H200): reinstall kiln with pip install --no-build-isolation")
    _kiln_torch = None
# The eager call in C++, which the public functions try first: (q, scales), or None where this
# module's path must run (a traced call, a CPU tensor, any argument it does not take as is).
fast_quantize = None if _kiln_torch is None else _kiln_torch.quantize

_Q_DTYPES = {"e4m3": torch.float8_e4m3fn, "int8": torch.int8}
# x's dtype -> the family's input name (a dict lookup per call instead of formatting the dtype)
_X_DTYPES = {getattr(torch, name): name for name in _variant.INPUTS}
# Why the raw stream: an int in about 0.1 us, where torch.cuda.current_stream() builds a Stream object.
_raw_stream = torch._C._cuda_getCurrentRawStream


def _address(t: torch.Tensor) -> int:
    """The data address, or under tracing (where there is none) its offset into the allocation,
    which kiln's allocators align to 256 bytes."""
    return t.data_ptr() if _eager(t) else t.storage_offset() * t.element_size()


def _check_x(x, group_size: int, layout: str, silu: bool) -> Tuple[int, int, int]:
    """(M, K, row stride in elements, 0 = dense) of a valid x; TypeError/ValueError naming x otherwise."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x: expected a torch.Tensor or an object with __dlpack__, got {type(x).__name__}")
    if x.dtype not in _X_DTYPES:
        raise TypeError(f"x: expected dtype bfloat16, float16 or float32, got {x.dtype}")
    if x.device.type not in ("cuda", "meta"):
        raise ValueError(f"x: expected a CUDA tensor, got one on {x.device}")
    m, k = _variant.check_shape(tuple(x.shape), group_size, layout, silu)
    if x.shape[-1] > 1 and x.stride(-1) != 1:
        raise ValueError(f"x: expected a contiguous last dimension (stride 1), got strides {tuple(x.stride())}")
    _variant.check_alignment("x", _address(x))
    if m <= 1 or x.is_contiguous():
        return m, k, 0
    try:
        stride = x.view(-1, x.shape[-1]).stride(0)
    except RuntimeError:
        raise ValueError(f"x: expected leading dimensions that collapse into rows of one stride, got shape "
                         f"{tuple(x.shape)} with strides {tuple(x.stride())}") from None
    # Why: the library reads a row stride of 0 as dense, so the rows of an expand()ed x (stride 0)
    # would be read as M distinct rows from a buffer that holds one.
    if stride < x.shape[-1]:
        raise ValueError(f"x: expected rows that do not overlap (a row stride of at least {x.shape[-1]} elements), "
                         f"got row stride {stride} (shape {tuple(x.shape)}, strides {tuple(x.stride())}, e.g. "
                         f"from expand()); call .contiguous() first")
    _variant.check_alignment("x rows", stride * x.element_size())
    return m, k, stride


def _empty_outputs(x: torch.Tensor, m: int, k: int, group_size: int, output: str, layout: str):
    """q like x (last dimension K) and the scales in `layout`; real and fake alike."""
    q = torch.empty(tuple(x.shape[:-1]) + (k,), dtype=_Q_DTYPES[output], device=x.device)
    return q, _empty_scales(x, m, k, group_size, layout)


def _empty_scales(x: torch.Tensor, m: int, k: int, group_size: int, layout: str):
    g = _variant.scale_geometry(tuple(x.shape[:-1]) if layout == "row_major" else (m,), k // group_size, layout)
    storage = torch.empty(g.storage, dtype=torch.int32 if g.packed else torch.float32, device=x.device)
    if layout == "row_major":
        return storage
    # Why a view of a larger allocation: TMA-aligned layouts keep their padding rows (M4 - M)
    # allocated, as DeepGEMM reads whole boxes.
    return storage.as_strided(g.view_shape, g.view_strides)


def _launch(x, q, scales, m: int, k: int, stride: int, group_size: int, eps: float, output: str, layout: str,
            ue8m0: bool, silu: bool):
    v = _variant.variant(_X_DTYPES[x.dtype], group_size, output, layout, ue8m0, silu)
    if m == 0 or k == 0:
        return
    device = x.get_device()
    stream = _raw_stream(device)
    try:
        _kiln.quantize(device, v, x.data_ptr(), q.data_ptr(), scales.data_ptr(), m, k, stride, eps, stream)
    except RuntimeError as error:
        reword_in_capture(error, x, group_size, output, layout, ue8m0, silu)
        raise


def reword_in_capture(error: RuntimeError, x, group_size: int, output: str, layout: str, ue8m0: bool,
                      silu: bool) -> None:
    """When a CUDA graph capture is why kiln could not load a kernel, raise that, naming the
    kiln.warm(...) call to make before capturing; otherwise return (the caller re-raises)."""
    if torch.cuda.is_current_stream_capturing():
        v = _variant.variant(_X_DTYPES[x.dtype], group_size, output, layout, ue8m0, silu)
        device = x.get_device()
        raise RuntimeError(
            f"kiln: variant {v} could not be loaded on cuda:{device} during CUDA graph capture ({error}); "
            f"call kiln.warm(device={device}, dtype={x.dtype}, group_size={group_size}, "
            f"output='{output}', scales='{layout}', use_ue8m0={ue8m0}, fuse_silu_and_mul={silu}) "
            f"before capturing") from error


def fast_launch_failed(error: RuntimeError, x, group_size, column_major_scales, tma_aligned_scales, use_ue8m0,
                       pack_ue8m0_scales, fuse_silu_and_mul, output: str) -> None:
    """reword_in_capture for fast_quantize, which only launches with plain bool flags."""
    layout = _variant.scale_layout(column_major_scales, tma_aligned_scales, use_ue8m0, pack_ue8m0_scales)
    reword_in_capture(error, x, group_size, output, layout, use_ue8m0, fuse_silu_and_mul)


# layout -> fast_quantize's (column_major_scales, tma_aligned_scales, pack_ue8m0_scales)
_LAYOUT_FLAGS = {"row_major": (False, False, False), "column_major": (True, False, False),
                 "column_major_tma": (True, True, False), "ue8m0_packed": (True, True, True)}


def _fast_body(x, out_q, group_size: int, eps: float, output: str, layout: str, ue8m0: bool, silu: bool):
    """The ops' Python kernel in one C++ call: (q, scales), or None where fast_quantize declines or
    is not built. On CUDA the ops' C++ kernels run first and call the body only to decline."""
    flags = _LAYOUT_FLAGS.get(layout)
    if fast_quantize is None or flags is None or output not in _Q_DTYPES:
        return None
    column, tma, packed = flags
    try:
        return fast_quantize(x, group_size, eps, column, tma, ue8m0, out_q, None, packed, silu, output == "int8")
    except _kiln_torch.LaunchError as error:
        reword_in_capture(error, x, group_size, output, layout, ue8m0, silu)
        raise


def _check_choice(name: str, value, allowed) -> None:
    if value not in allowed:
        raise ValueError(f"{name}: expected one of {tuple(allowed)}, got {value!r}")


def _check_op_strings(output: str, layout: str) -> None:
    """The ops' schemas take any str for these."""
    _check_choice("output", output, _Q_DTYPES)
    _check_choice("layout", layout, _variant.LAYOUTS)


def per_token_group_quant(x: torch.Tensor, group_size: int, eps: float, output: str, layout: str,
                          use_ue8m0: bool, silu_and_mul: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    done = _fast_body(x, None, group_size, eps, output, layout, use_ue8m0, silu_and_mul)
    if done is not None:
        return done
    _check_op_strings(output, layout)
    m, k, stride = _check_x(x, group_size, layout, silu_and_mul)
    q, scales = _empty_outputs(x, m, k, group_size, output, layout)
    _launch(x, q, scales, m, k, stride, group_size, eps, output, layout, use_ue8m0, silu_and_mul)
    return q, scales


def _fake(x, group_size, eps, output, layout, use_ue8m0, silu_and_mul):
    _check_op_strings(output, layout)
    m, k, _ = _check_x(x, group_size, layout, silu_and_mul)
    return _empty_outputs(x, m, k, group_size, output, layout)


def per_token_group_quant_out(x: torch.Tensor, out_q: torch.Tensor, group_size: int, eps: float, output: str,
                              layout: str, use_ue8m0: bool, silu_and_mul: bool) -> torch.Tensor:
    done = _fast_body(x, out_q, group_size, eps, output, layout, use_ue8m0, silu_and_mul)
    if done is not None:
        return done[1]
    _check_op_strings(output, layout)
    m, k, stride = _check_x(x, group_size, layout, silu_and_mul)
    _check_out_q(out_q, x, k, output)
    # Why here and in the fake: the op has no ADInplaceOrView kernel (below) to bump out_q's
    # version; _fast_body bumps it likewise.
    torch.autograd.graph.increment_version(out_q)
    scales = _empty_scales(x, m, k, group_size, layout)
    _launch(x, out_q, scales, m, k, stride, group_size, eps, output, layout, use_ue8m0, silu_and_mul)
    return scales


def _fake_out(x, out_q, group_size, eps, output, layout, use_ue8m0, silu_and_mul):
    _check_op_strings(output, layout)
    m, k, _ = _check_x(x, group_size, layout, silu_and_mul)
    _check_out_q(out_q, x, k, output)
    torch.autograd.graph.increment_version(out_q)
    return _empty_scales(x, m, k, group_size, layout)


# Why torch.library.Library and not torch.library.custom_op: custom_op wraps the body in Python
# kernels at the Autograd and ADInplaceOrView keys, which made the dispatch of a call through
# torch.ops.kiln.* (what a compiled graph makes) three times as costly (docs/performance.md,
# "Python"). The schemas are the ones custom_op inferred, so
# graphs that name the ops stay valid.
_LIBRARY = torch.library.Library("kiln", "DEF")
_OPS = (
    ("per_token_group_quant", "(Tensor x, SymInt group_size, float eps, str output, str layout, bool use_ue8m0, "
     "bool silu_and_mul) -> (Tensor, Tensor)", per_token_group_quant, _fake),
    ("per_token_group_quant_out", "(Tensor x, Tensor(a1!) out_q, SymInt group_size, float eps, str output, "
     "str layout, bool use_ue8m0, bool silu_and_mul) -> Tensor", per_token_group_quant_out, _fake_out),
)


def _register_ops() -> None:
    for name, schema, body, fake in _OPS:
        _LIBRARY.define(name + schema, tags=(torch.Tag.pt2_compliant_tag,))
        # Why every backend: a CPU tensor reaches the body, which raises the ValueError naming x.
        _LIBRARY.impl(name, body, "CompositeExplicitAutograd")
        # Why: a quantizer has no gradient; its outputs come out not requiring one, so a backward
        # through them is refused instead of silently giving x none.
        _LIBRARY.impl(name, torch.library.fallthrough_kernel, "Autograd")
        torch.library.register_fake(f"kiln::{name}", fake, lib=_LIBRARY)
    # Why C++ kernels at the CUDA key: a Python kernel costs a boxed Python call on every dispatch,
    # which compiled graphs pay per call (python/ext/torch_op_kernels.cpp); they run these bodies
    # where they decline, so errors stay the ones above.
    if _kiln_torch is not None:
        _kiln_torch.register_op_kernels(per_token_group_quant, per_token_group_quant_out)


_register_ops()


def _check_out_q(out_q, x: torch.Tensor, k: int, output: str) -> None:
    if not isinstance(out_q, torch.Tensor):
        raise TypeError(f"out_q: expected a torch.Tensor, got {type(out_q).__name__}")
    want = _Q_DTYPES[output]
    if out_q.dtype != want:
        raise TypeError(f"out_q: expected dtype {want}, got {out_q.dtype}")
    shape = tuple(x.shape[:-1]) + (k,)
    if tuple(out_q.shape) != shape:
        raise ValueError(f"out_q: expected shape {shape}, got {tuple(out_q.shape)}")
    if out_q.device != x.device:
        raise ValueError(f"out_q: expected a tensor on {x.device} (x's device), got one on {out_q.device}")
    if not out_q.is_contiguous():
        raise ValueError(f"out_q: expected a contiguous tensor, got strides {tuple(out_q.stride())}")
    _variant.check_alignment("out_q", _address(out_q))


def _eager(x: torch.Tensor) -> bool:
    """True when nothing traces this call (no torch.compile, no make_fx or fake mode, a plain
    tensor), so the op can run without the dispatcher: its Python round trip costs microseconds
    per call, more than the launch."""
    return (type(x) is torch.Tensor and x.device.type == "cuda" and not torch.compiler.is_compiling()
            and torch._C._len_torch_dispatch_stack() == 0)


def _op(x, out_q, group_size: int, eps: float, output: str, layout: str, ue8m0: bool, silu: bool):
    if out_q is None:
        return torch.ops.kiln.per_token_group_quant(x, group_size, eps, output, layout, ue8m0, silu)
    return out_q, torch.ops.kiln.per_token_group_quant_out(x, out_q, group_size, eps, output, layout, ue8m0, silu)


def _check_flag(name: str, value) -> bool:
    """A flag is a bool. Why strict: vLLM's fourth positional argument is `dtype` where kiln's is
    column_major_scales, and bool(torch.int8) is True."""
    if not isinstance(value, bool):
        got = f"{value} (dtype is a keyword argument here)" if isinstance(value, torch.dtype) else type(value).__name__
        raise TypeError(f"{name}: expected a bool, got {got}")
    return value


def quantize(x, group_size, eps, column_major_scales, tma_aligned_scales, use_ue8m0, out_q, output: str,
             pack_ue8m0_scales: bool = False, fuse_silu_and_mul: bool = False):
    """What the public functions share: check every argument, then the op (or, untraced, its body)."""
    _variant.check_group_size(group_size)
    eps = _variant.check_eps(eps)
    ue8m0 = _check_flag("use_ue8m0", use_ue8m0)
    layout = _variant.scale_layout(_check_flag("column_major_scales", column_major_scales),
                                   _check_flag("tma_aligned_scales", tma_aligned_scales), ue8m0,
                                   _check_flag("pack_ue8m0_scales", pack_ue8m0_scales))
    silu = _check_flag("fuse_silu_and_mul", fuse_silu_and_mul)
    if output == "int8" and ue8m0:
        _variant.variant("bfloat16", group_size, output, layout, ue8m0, silu)  # raises the ValueError
    # Why straight to the op under torch.compile: dynamo cannot trace storage queries; the fake
    # implementations check x and out_q when it runs them.
    if torch.compiler.is_compiling():
        return _op(x, out_q, group_size, eps, output, layout, ue8m0, silu)
    m, k, stride = _check_x(x, group_size, layout, silu)
    if out_q is not None:
        _check_out_q(out_q, x, k, output)
    if not _eager(x):
        return _op(x, out_q, group_size, eps, output, layout, ue8m0, silu)
    if out_q is None:
        q, scales = _empty_outputs(x, m, k, group_size, output, layout)
    else:
        q, scales = out_q, _empty_scales(x, m, k, group_size, layout)
        # Why: as the op's mutation annotation would, so autograd sees out_q changed.
        torch.autograd.graph.increment_version(out_q)
    _launch(x, q, scales, m, k, stride, group_size, eps, output, layout, ue8m0, silu)
    return q, scales


def check_dtype(dtype, output: str) -> None:
    """vLLM's `dtype` argument: None or the one dtype the output has."""
    if dtype is not None and dtype != _Q_DTYPES[output]:
        raise TypeError(f"dtype: expected None or {_Q_DTYPES[output]}, got {dtype}")


def warm(device: Optional[int], dtype, group_size: int, output: str, scales: str, use_ue8m0: bool,
         fuse_silu_and_mul: bool = False) -> bool:
    if device is None:
        device = torch.cuda.current_device()
    name = str(dtype).replace("torch.", "")
    if name not in _variant.INPUTS:
        raise TypeError(f"dtype: expected torch.bfloat16, torch.float16 or torch.float32, got {dtype}")
    _check_choice("output", output, _variant.OUTPUTS)
    _check_choice("scales", scales, _variant.LAYOUTS)
    _variant.check_group_size(group_size)
    return _kiln.warm(device, _variant.variant(name, group_size, output, scales, _check_flag("use_ue8m0", use_ue8m0),
                                               _check_flag("fuse_silu_and_mul", fuse_silu_and_mul)))
