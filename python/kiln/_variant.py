"""Which quantizer variant a call asks for, from the public functions' arguments: plain Python.
The op's checks of its tensors and the scales' geometry are C++'s (kiln._kiln.plan)."""

from . import _kiln

GROUP_SIZES = (32, 64, 128)
# torch dtype name -> the family's input parameter
INPUTS = {"bfloat16": _kiln.QuantInput.bf16, "float16": _kiln.QuantInput.fp16, "float32": _kiln.QuantInput.fp32}
OUTPUTS = {"e4m3": _kiln.QuantOutput.e4m3, "int8": _kiln.QuantOutput.int8}
LAYOUTS = ("row_major", "column_major", "column_major_tma", "ue8m0_packed")


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
