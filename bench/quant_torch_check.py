#!/usr/bin/env python3
"""Every variant of kiln's quantizer family against a reference written with PyTorch ops on the GPU
(independent of kiln's CPU reference), through the C ABI (kiln_quant).

Variants without SiLU must match byte for byte (codes and scales). With SiLU the torch reference uses
torch.exp, kiln a portable e^x both of its sides share, so the activation can differ in the last bit:
there the check bounds the difference (codes at most one step apart in at most 0.1% of elements,
scales within 8 ulp) and prints the counts. Exits 1 on any failure. Usage: quant_torch_check.py LIBKILN
"""
import ctypes
import itertools
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "python"))
import torch_reference  # noqa: E402  (tests/python/torch_reference.py: one reference for both)

IN = {"bf16": (0, torch.bfloat16), "fp16": (1, torch.float16), "fp32": (2, torch.float32)}
OUT = {"e4m3": (0, 448.0, -448.0), "int8": (1, 127.0, -128.0)}
SCALES = {"row": 0, "col": 1, "col_tma": 2, "packed": 3}


class Params(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("input", ctypes.c_int32), ("group", ctypes.c_uint32),
                ("output", ctypes.c_int32), ("scales", ctypes.c_int32), ("ue8m0", ctypes.c_int32),
                ("silu_and_mul", ctypes.c_int32), ("eps", ctypes.c_float), ("x_row_stride", ctypes.c_uint64),
                ("flags", ctypes.c_uint32), ("reserved", ctypes.c_uint32)]


def variants():
    for inp, group, out, scales, ue8m0, silu in itertools.product(IN, (32, 64, 128), OUT, SCALES, (0, 1), (0, 1)):
        if out == "int8" and ue8m0:
            continue
        if scales == "packed" and not ue8m0:
            continue
        yield inp, group, out, scales, ue8m0, silu


def make_input(m, k, dtype, silu, special, gen):
    cols = 2 * k if silu else k
    x = torch.randn(m, cols, generator=gen, device="cuda") * torch.exp2(
        torch.randint(-8, 8, (m, cols // 32, 1), generator=gen, device="cuda").float()).repeat_interleave(32, 2).view(m, cols)
    if special:
        x[0, :] = 0
        flat = x.view(-1)
        idx = torch.randperm(flat.numel(), generator=gen, device="cuda")[: flat.numel() // 50]
        vals = torch.tensor([float("nan"), float("inf"), float("-inf"), 0.0, -0.0, 1e-30, 6e4], device="cuda")
        flat[idx] = vals[torch.arange(idx.numel(), device="cuda") % vals.numel()]
    return x.to(dtype)


def layout_scales(scale, scales):
    if scales == "row":
        return scale.reshape(-1).view(torch.uint8)
    if scales == "col":
        return scale.t().reshape(-1).view(torch.uint8)
    return torch_reference.packed_exponents(scale)


def main():
    lib = ctypes.CDLL(sys.argv[1])
    service = ctypes.c_void_p()
    assert lib.kiln_service_create(0, ctypes.byref(service)) == 0
    lib.kiln_last_error.restype = ctypes.c_char_p
    lib.kiln_quant.argtypes = [ctypes.c_void_p, ctypes.POINTER(Params), ctypes.c_void_p, ctypes.c_void_p,
                               ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_void_p]
    gen = torch.Generator(device="cuda").manual_seed(1234)
    failures, checked, silu_notes = 0, 0, []
    for inp, group, out, scales, ue8m0, silu in variants():
        for m, k, special in ((1, 128, False), (33, 1024, True), (257, 7168, False)):
            x = make_input(m, k, IN[inp][1], silu, special and not silu, gen)
            p = Params()
            assert lib.kiln_quant_params_init(ctypes.byref(p)) == 0
            p.input, p.group, p.output, p.scales, p.ue8m0, p.silu_and_mul = (
                IN[inp][0], group, OUT[out][0], SCALES[scales], ue8m0, silu)
            nbytes = ctypes.c_uint64()
            assert lib.kiln_quant_scales_bytes(ctypes.byref(p), m, k, ctypes.byref(nbytes)) == 0
            q = torch.full((m, k), 0xA5, dtype=torch.uint8, device="cuda")
            s = torch.full((nbytes.value,), 0xA5, dtype=torch.uint8, device="cuda")
            status = lib.kiln_quant(service, ctypes.byref(p), x.data_ptr(), q.data_ptr(), s.data_ptr(), m, k,
                                    torch.cuda.current_stream().cuda_stream)
            name = f"{inp}-g{group}-{out}-{scales}{'-ue8m0' if ue8m0 else ''}{'-silu' if silu else ''} m={m} k={k}"
            if status != 0:
                print(f"FAIL {name}: status {status}: {lib.kiln_last_error().decode()}")
                failures += 1
                continue
            torch.cuda.synchronize()
            codes, scale = torch_reference.quantize(x, k, group, out, ue8m0, silu, 1e-10)
            if scales == "col_tma":
                m4 = (m + 3) // 4 * 4
                got_scale = s.view(torch.float32).view(k // group, m4)[:, :m].t()
                scale_diff = (got_scale.view(torch.int32) - scale.view(torch.int32)).abs()
            elif scales == "packed":
                expect = layout_scales(scale, scales)
                scale_diff = (s.to(torch.int32) - expect.to(torch.int32)).abs()
            else:
                expect = layout_scales(scale, scales).view(torch.int32)
                scale_diff = (s.view(torch.int32) - expect).abs()
            code_diff = (q.to(torch.int32) - codes.to(torch.int32)).abs()
            checked += 1
            if not silu:
                if code_diff.max().item() != 0 or scale_diff.max().item() != 0:
                    print(f"FAIL {name}: {int((code_diff != 0).sum())} codes and {int((scale_diff != 0).sum())} "
                          f"scales differ from the torch reference")
                    failures += 1
            else:
                # One e4m3 step is one code apart except across zero (0x00 / 0x80), which is a sign change.
                off = int((code_diff != 0).sum())
                worst_scale = int(scale_diff.max())
                silu_notes.append(off / code_diff.numel())
                if off > code_diff.numel() // 1000 or worst_scale > 8:
                    print(f"FAIL {name}: {off} codes differ, scales up to {worst_scale} ulp")
                    failures += 1
    print(f"torch check: {checked} variant x shape cases, {failures} failed; SiLU variants: worst fraction of codes "
          f"off the torch.exp reference {max(silu_notes):.5f}")
    lib.kiln_service_destroy(service)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
