"""The quantizer as PyTorch custom ops (torch.ops.kiln.*): the schemas and fake implementations
here, the kernels in C++ on PyTorch's stable ABI (kiln._kiln_ops), and the vLLM-named functions
over them.

Two ops, because a custom op's output may not alias its input: `per_token_group_quant` returns a
new (q, scales); `per_token_group_quant_out` writes q into `out_q` (declared mutated) and returns
scales. Every check of the ops' arguments and the outputs' geometry are C++'s (kiln._kiln.plan,
the same code the kernels run): the fakes ask it, so fake and real outputs cannot differ."""

import importlib
from typing import Optional

import torch

from . import _dlpack, _kiln, _variant

_Q_DTYPES = {"e4m3": torch.float8_e4m3fn, "int8": torch.int8}
_SCALE_DTYPES = {"torch.float32": torch.float32, "torch.int32": torch.int32}

# Why torch.library.Library and not torch.library.custom_op: custom_op wraps the body in Python
# kernels at the Autograd and ADInplaceOrView keys, which made a call through torch.ops.kiln.*
# (what a compiled graph makes) three times as costly (docs/performance.md, "Python"). Why the
# schemas here and not in C++: the stable ABI of PyTorch 2.10 defines no tags.
_LIBRARY = torch.library.Library("kiln", "DEF")
_ARGS = ("int group_size, float eps, str output, str layout, bool use_ue8m0, bool silu_and_mul, "
         "bool batched=False, Tensor? masked_m=None")
_LIBRARY.define("per_token_group_quant(Tensor x, " + _ARGS + ") -> (Tensor, Tensor)",
                tags=(torch.Tag.pt2_compliant_tag,))
_LIBRARY.define("per_token_group_quant_out(Tensor x, Tensor(a!) out_q, " + _ARGS + ") -> Tensor",
                tags=(torch.Tag.pt2_compliant_tag,))
# Why: a quantizer has no gradient; its outputs come out not requiring one, so a backward through
# them is refused instead of silently giving x none.
_LIBRARY.impl("per_token_group_quant", torch.library.fallthrough_kernel, "Autograd")
_LIBRARY.impl("per_token_group_quant_out", torch.library.fallthrough_kernel, "Autograd")
# Loading it registers the kernels (python/ext/kiln_ops.cpp). Why importlib: `from . import` of a
# missing extension says "circular import" instead of what is missing.
importlib.import_module("._kiln_ops", __package__)

_OP = torch.ops.kiln.per_token_group_quant.default
_OP_OUT = torch.ops.kiln.per_token_group_quant_out.default
# Why the raw callables eagerly: OpOverload.__call__ is one more Python frame per call. The
# dispatcher behind them is the same, dispatch modes and subclasses included.
_CALL = getattr(_OP, "_op", _OP)
_CALL_OUT = getattr(_OP_OUT, "_op", _OP_OUT)


def _facts(t, real: bool = False):
    """What kiln._kiln.plan reads of a tensor. The address: for a real CUDA tensor its data, else
    (fake, meta) its storage offset in bytes, since kiln's allocators align allocations to 256."""
    if t is None:
        return None
    strided = t.layout == torch.strided
    offset = t.storage_offset() * t.element_size() if strided else 0
    address = t.data_ptr() if real and strided and t.device.type == "cuda" else offset
    return (str(t.dtype), str(t.device), strided, tuple(t.shape) if strided else (),
            t.stride() if strided else (), address, t.element_size())


def _plan(x, out_q, masked_m, group_size, eps, output, layout, ue8m0, silu, batched, real=False):
    return _kiln.plan(_facts(x, real), _facts(out_q, real), _facts(masked_m, real), group_size, eps, output, layout,
                      ue8m0, silu, batched)


def _empty_scales(x, plan):
    _, _, storage, shape, strides, dtype, view = plan
    if not view:
        return torch.empty(shape, dtype=_SCALE_DTYPES[dtype], device=x.device)
    # Why a view of a larger allocation: TMA-aligned layouts keep their padding rows (M4 - M)
    # allocated, as DeepGEMM reads whole boxes.
    return torch.empty(storage, dtype=_SCALE_DTYPES[dtype], device=x.device).as_strided(shape, strides)


@torch.library.register_fake("kiln::per_token_group_quant", lib=_LIBRARY)
def _fake(x, group_size, eps, output, layout, use_ue8m0, silu_and_mul, batched=False, masked_m=None):
    plan = _plan(x, None, masked_m, group_size, eps, output, layout, use_ue8m0, silu_and_mul, batched)
    return torch.empty(plan[0], dtype=_Q_DTYPES[output], device=x.device), _empty_scales(x, plan)


@torch.library.register_fake("kiln::per_token_group_quant_out", lib=_LIBRARY)
def _fake_out(x, out_q, group_size, eps, output, layout, use_ue8m0, silu_and_mul, batched=False, masked_m=None):
    plan = _plan(x, out_q, masked_m, group_size, eps, output, layout, use_ue8m0, silu_and_mul, batched)
    torch.autograd.graph.increment_version(out_q)
    return _empty_scales(x, plan)


def _explain(error: RuntimeError, x, out_q, masked_m, group_size, eps, output, layout, ue8m0, silu, batched):
    """The C++ kernels refuse with a RuntimeError (the stable ABI carries no other exception type):
    raise the TypeError or ValueError it stands for, from the same checks, or the capture's
    kiln.warm(...) advice; return where the error is none of those (the caller re-raises it)."""
    try:
        _plan(x, out_q, masked_m, group_size, eps, output, layout, ue8m0, silu, batched, real=True)
    except (TypeError, ValueError) as refusal:
        raise refusal from None
    message = str(error)
    if _kiln.is_invalid_argument(message):
        raise ValueError(message) from None
    reword_in_capture(error, x, group_size, output, layout, ue8m0, silu)


def reword_in_capture(error: RuntimeError, x, group_size: int, output: str, layout: str, ue8m0: bool,
                      silu: bool) -> None:
    """When a CUDA graph capture is why kiln could not load a kernel, raise that, naming the
    kiln.warm(...) call to make before capturing; otherwise return (the caller re-raises)."""
    if torch.cuda.is_current_stream_capturing():
        v = _variant.variant(str(x.dtype).replace("torch.", ""), group_size, output, layout, ue8m0, silu)
        device = x.get_device()
        raise RuntimeError(
            f"kiln: variant {v} could not be loaded on cuda:{device} during CUDA graph capture ({error}); "
            f"call kiln.warm(device={device}, dtype={x.dtype}, group_size={group_size}, "
            f"output='{output}', scales='{layout}', use_ue8m0={ue8m0}, fuse_silu_and_mul={silu}) "
            f"before capturing") from error


def _check_flag(name: str, value) -> bool:
    """A flag is a bool. Why strict: vLLM's fourth positional argument is `dtype` where kiln's is
    column_major_scales, and bool(torch.int8) is True."""
    if not isinstance(value, bool):
        got = f"{value} (dtype is a keyword argument here)" if isinstance(value, torch.dtype) else type(value).__name__
        raise TypeError(f"{name}: expected a bool, got {got}")
    return value


# (column_major_scales, tma_aligned_scales, use_ue8m0, pack_ue8m0_scales), all bools -> layout
_LAYOUTS = {}
for _flags in ((c, t, u, p) for c in (False, True) for t in (False, True) for u in (False, True) for p in (False, True)):
    try:
        _LAYOUTS[_flags] = _variant.scale_layout(*_flags)
    except ValueError:
        pass
_GROUPS = frozenset(_variant.GROUP_SIZES)


def _check_arguments(output, group_size, eps, column_major_scales, tma_aligned_scales, use_ue8m0,
                     pack_ue8m0_scales, fuse_silu_and_mul, dtype, batched):
    """The public functions' own arguments, each error naming its argument: (eps, layout)."""
    _variant.check_group_size(group_size)
    eps = _variant.check_eps(eps)
    ue8m0 = _check_flag("use_ue8m0", use_ue8m0)
    layout = _variant.scale_layout(_check_flag("column_major_scales", column_major_scales),
                                   _check_flag("tma_aligned_scales", tma_aligned_scales), ue8m0,
                                   _check_flag("pack_ue8m0_scales", pack_ue8m0_scales))
    _check_flag("fuse_silu_and_mul", fuse_silu_and_mul)
    _check_flag("batched", batched)
    if output == "int8" and ue8m0:
        _variant.variant("bfloat16", group_size, output, layout, ue8m0)  # raises the ValueError
    if dtype is not None and dtype != _Q_DTYPES[output]:
        raise TypeError(f"dtype: expected None or {_Q_DTYPES[output]}, got {dtype}")
    return eps, layout


def public(name: str, output: str, doc: str):
    """One of the public quantizers (kiln.per_token_group_quant_fp8, _int8). Why a factory: the two
    differ only in the output, and the body is the hot path: the usual arguments (bools, a float
    eps, a valid group) are recognised with a few identity tests and go straight to the op."""
    compiling = torch.compiler.is_compiling
    increment_version = torch.autograd.graph.increment_version
    tensor = torch.Tensor

    def quantize(x, group_size=128, eps=1e-10, column_major_scales=False, tma_aligned_scales=False, use_ue8m0=False,
                 out_q=None, *, dtype=None, pack_ue8m0_scales=False, fuse_silu_and_mul=False, masked_m=None,
                 batched=None):
        if batched is None:
            batched = masked_m is not None
        layout = None
        if (type(column_major_scales) is bool and type(tma_aligned_scales) is bool and type(use_ue8m0) is bool
                and type(pack_ue8m0_scales) is bool and type(fuse_silu_and_mul) is bool and type(batched) is bool
                and type(eps) is float and 0 < eps <= _variant.EPS_MAX and type(group_size) is int
                and group_size in _GROUPS and dtype is None and not (use_ue8m0 and output == "int8")):
            layout = _LAYOUTS.get((column_major_scales, tma_aligned_scales, use_ue8m0, pack_ue8m0_scales))
        if layout is None:
            eps, layout = _check_arguments(output, group_size, eps, column_major_scales, tma_aligned_scales, use_ue8m0,
                                           pack_ue8m0_scales, fuse_silu_and_mul, dtype, batched)
        if type(x) is not tensor:
            x = _dlpack.as_tensor(x, "x")
        if out_q is not None and type(out_q) is not tensor:
            out_q = _dlpack.as_tensor(out_q, "out_q")
        if masked_m is not None and type(masked_m) is not tensor:
            masked_m = _dlpack.as_tensor(masked_m, "masked_m")
        # Why the overloads under torch.compile: dynamo traces them (through the fakes), not the
        # raw callables.
        traced = compiling()
        try:
            if out_q is None:
                return (_OP if traced else _CALL)(x, group_size, eps, output, layout, use_ue8m0, fuse_silu_and_mul,
                                                  batched, masked_m)
            scales = (_OP_OUT if traced else _CALL_OUT)(x, out_q, group_size, eps, output, layout, use_ue8m0,
                                                        fuse_silu_and_mul, batched, masked_m)
        except RuntimeError as error:
            if traced:
                raise
            _explain(error, x, out_q, masked_m, group_size, eps, output, layout, use_ue8m0, fuse_silu_and_mul,
                     batched)
            raise
        if not traced:
            # Why: the kernel cannot bump out_q's version (the stable ABI has no call for it); as
            # the op's mutation annotation would, so autograd sees out_q changed.
            increment_version(out_q)
        return out_q, scales

    quantize.__name__ = quantize.__qualname__ = name
    quantize.__doc__ = doc
    return quantize


def warm(device: Optional[int], dtype, group_size: int, output: str, scales: str, use_ue8m0: bool,
         fuse_silu_and_mul: bool = False, batched: bool = False) -> bool:
    if device is None:
        device = torch.cuda.current_device()
    name = str(dtype).replace("torch.", "")
    if name not in _variant.INPUTS:
        raise TypeError(f"dtype: expected torch.bfloat16, torch.float16 or torch.float32, got {dtype}")
    if output not in _variant.OUTPUTS:
        raise ValueError(f"output: expected one of {tuple(_variant.OUTPUTS)}, got {output!r}")
    if scales not in _variant.LAYOUTS:
        raise ValueError(f"scales: expected one of {_variant.LAYOUTS}, got {scales!r}")
    _variant.check_group_size(group_size)
    v = _variant.variant(name, group_size, output, scales, _check_flag("use_ue8m0", use_ue8m0),
                         _check_flag("fuse_silu_and_mul", fuse_silu_and_mul))
    return _kiln.warm(device, v, _check_flag("batched", batched))
