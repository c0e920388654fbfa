"""Which quantizer variant a call asks for, and the shapes and strides of its scales: plain Python,
shared by the torch op, its fake implementation and the DLPack path."""

from dataclasses import dataclass
from typing import Optional, Tuple

from . import _kiln

GROUP_SIZES = (32, 64, 128)
# torch dtype name -> the family's input parameter
INPUTS = {"bfloat16": _kiln.QuantInput.bf16, "float16": _kiln.QuantInput.fp16, "float32": _kiln.QuantInput.fp32}
OUTPUTS = {"e4m3": _kiln.QuantOutput.e4m3, "int8": _kiln.QuantOutput.int8}
LAYOUTS = ("row_major", "column_major", "column_major_tma", "ue8m0_packed")
# Why the alignment: the family's kernels read x and write q in 16-byte vectors (issue 15); the
# allocators give 256-byte aligned buffers, so only a view's storage offset can break it.
ALIGNMENT = 16


def scale_layout(column_major_scales: bool, tma_aligned_scales: bool, use_ue8m0: bool,
                 pack_ue8m0_scales: bool) -> str:
    """vLLM's flags -> one layout name; raises ValueError for combinations that mean nothing."""
    if tma_aligned_scales and not column_major_scales:
        raise ValueError("tma_aligned_scales: TMA alignment pads the M dimension of column-major scales; "
                         "it needs column_major_scales=True")
    if pack_ue8m0_scales:
        if not (use_ue8m0 and column_major_scales and tma_aligned_scales):
            raise ValueError("pack_ue8m0_scales: the packed int32 layout (DeepGEMM on SM100) holds UE8M0 "
                             "exponents in TMA-aligned column-major order; it needs use_ue8m0=True, "
                             "column_major_scales=True and tma_aligned_scales=True")
        return "ue8m0_packed"
    if column_major_scales:
        return "column_major_tma" if tma_aligned_scales else "column_major"
    return "row_major"


def round_up(value: int, multiple: int) -> int:
    return (value + multiple - 1) // multiple * multiple


@dataclass(frozen=True)
class ScaleGeometry:
    """Scales as allocated (`storage`, row-major) and as returned (a view of it)."""
    storage: Tuple[int, ...]
    view_shape: Tuple[int, ...]
    view_strides: Tuple[int, ...]
    packed: bool  # int32 words of four UE8M0 exponents instead of fp32


def scale_geometry(lead_shape: Tuple[int, ...], groups: int, layout: str) -> ScaleGeometry:
    """Row-major: `lead_shape + (G,)` contiguous. Column-major: storage (G, M), view (M, G) with
    strides (1, M). TMA-aligned: M4 = M rounded up to 4, storage (G, M4), view strides (1, M4).
    Packed UE8M0: int32 storage (ceil(G/4), M4), view (M, ceil(G/4)) with strides (1, M4)."""
    if layout == "row_major":
        shape = tuple(lead_shape) + (groups,)
        strides = []
        step = 1
        for extent in reversed(shape):
            strides.append(step)
            step *= extent
        return ScaleGeometry(shape, shape, tuple(reversed(strides)), False)
    (m,) = lead_shape
    if layout == "column_major":
        return ScaleGeometry((groups, m), (m, groups), (1, m), False)
    m4 = round_up(m, 4)
    if layout == "column_major_tma":
        return ScaleGeometry((groups, m4), (m, groups), (1, m4), False)
    words = (groups + 3) // 4
    return ScaleGeometry((words, m4), (m, words), (1, m4), True)


_variants = {}


def variant(input_name: str, group: int, output: str, layout: str, ue8m0: bool,
            silu_and_mul: bool = False) -> "_kiln.QuantVariant":
    """The extension's variant struct, made once per combination (a call costs a dict lookup)."""
    key = (input_name, group, output, layout, ue8m0, silu_and_mul)
    found = _variants.get(key)
    if found is None:
        if output == "int8" and ue8m0:
            raise ValueError("use_ue8m0: int8 output takes fp32 scales (absmax / 127); UE8M0 scales exist only "
                             "for per_token_group_quant_fp8")
        found = _kiln.QuantVariant(input=INPUTS[input_name], group=group, output=OUTPUTS[output],
                                   scales=getattr(_kiln.ScaleLayout, layout), ue8m0=ue8m0,
                                   silu_and_mul=silu_and_mul)
        _variants[key] = found
    return found


def check_group_size(group_size) -> int:
    if isinstance(group_size, bool) or not isinstance(group_size, int):
        raise TypeError(f"group_size: expected an int in {GROUP_SIZES}, got {type(group_size).__name__}")
    if group_size not in GROUP_SIZES:
        raise ValueError(f"group_size: expected one of {GROUP_SIZES}, got {group_size}")
    return group_size


# Why the bound: the kernels take eps as a float32; a larger double would become inf there.
EPS_MAX = 3.4028234663852886e38


def check_eps(eps) -> float:
    if isinstance(eps, bool) or not isinstance(eps, (int, float)):
        raise TypeError(f"eps: expected a float > 0, got {type(eps).__name__}")
    if not 0 < eps <= EPS_MAX:
        raise ValueError(f"eps: expected a float in 0 < eps <= {EPS_MAX} (the largest float32), got {eps}")
    return float(eps)


def check_shape(shape: Tuple[int, ...], group_size: int, layout: str, silu_and_mul: bool = False) -> Tuple[int, int]:
    """(M, K) of the output for an x of `shape` ([..., K], or [..., 2K] with the fused SiLU), or
    ValueError naming x."""
    if len(shape) < 1:
        raise ValueError("x: expected at least one dimension (..., K), got a 0-d tensor")
    if layout != "row_major" and len(shape) != 2:
        raise ValueError(f"x: column-major scales ({layout}) need a 2-d x (M, K), got shape {tuple(shape)}")
    columns = shape[-1]
    if silu_and_mul:
        if columns % 2:
            raise ValueError(f"x: fuse_silu_and_mul takes x = [gate, up] with an even last dimension (2K), got {columns}")
        columns //= 2
    if columns % group_size:
        raise ValueError(f"x: the last dimension (K = {columns}{' after halving for fuse_silu_and_mul' if silu_and_mul else ''}) "
                         f"must be a multiple of group_size = {group_size}")
    m = 1
    for extent in shape[:-1]:
        m *= extent
    return m, columns


def check_alignment(name: str, address: int) -> None:
    if address % ALIGNMENT:
        raise ValueError(f"{name}: expected data {ALIGNMENT}-byte aligned, got address {address:#x} "
                         f"(a view whose storage offset is not a multiple of {ALIGNMENT} bytes)")

