#!/usr/bin/env python3
"""kiln from Python through its C ABI, with ctypes only: create a service, print the device and a
pick, and (with a GPU and PyTorch) quantize a CUDA bf16 tensor and compare it with a PyTorch
reference of the same numerics, byte for byte and bit for bit.

    quantize.py [--lib PATH] [--cpu-only | --gpu]

The library is --lib, else $KILN_LIB, else libkiln.so on the loader's path. Default: the CPU part,
then the GPU part when there is a GPU and PyTorch (exit 0 either way); --cpu-only: the CPU part
only; --gpu: exit 77 (skipped) without them.
"""
import argparse
import ctypes
import os
import sys

ABI_VERSION = 1
OK, INVALID_ARGUMENT = 0, 1
LEVER_ON = 1
REJECT_TOO_FEW_CTAS = 3


class DeviceInfo(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("ordinal", ctypes.c_int32), ("cc_major", ctypes.c_int32),
                ("cc_minor", ctypes.c_int32), ("sm_count", ctypes.c_uint32), ("available", ctypes.c_int32),
                ("name", ctypes.c_char * 256), ("target", ctypes.c_char * 32), ("reason", ctypes.c_char * 256)]


class Fp8Pick(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("twin", ctypes.c_int32), ("kernel", ctypes.c_uint64),
                ("grid", ctypes.c_uint32 * 3), ("block", ctypes.c_uint32 * 3), ("reject", ctypes.c_int32),
                ("requested", ctypes.c_int32), ("entry", ctypes.c_char * 64), ("reason", ctypes.c_char * 128)]

    def __str__(self):
        text = f"{self.entry.decode()} (handle {self.kernel:#x}) grid {tuple(self.grid)} block {tuple(self.block)}"
        return text if self.twin else f"{text}, not the twin: {self.reason.decode()}"


# The v1 sizes of kiln.h (KILN_*_V1_SIZE).
assert ctypes.sizeof(DeviceInfo) == 568 and ctypes.sizeof(Fp8Pick) == 240


class KilnError(Exception):
    def __init__(self, lib, status):
        super().__init__(f"{lib.kiln_status_string(status).decode()}: {lib.kiln_last_error().decode()}")
        self.status = status


def load(path):
    lib = ctypes.CDLL(path)
    P = ctypes.POINTER
    u32, i32, void_p = ctypes.c_uint32, ctypes.c_int32, ctypes.c_void_p
    signatures = {
        "kiln_last_error": ([], ctypes.c_char_p),
        "kiln_status_string": ([i32], ctypes.c_char_p),
        "kiln_version": ([P(u32), P(u32), P(u32)], i32),
        "kiln_abi_version": ([P(u32)], i32),
        "kiln_service_create": ([i32, P(void_p)], i32),
        "kiln_service_destroy": ([void_p], i32),
        "kiln_service_device_info": ([void_p, P(DeviceInfo)], i32),
        "kiln_fp8_act_quant_pick": ([void_p, u32, u32, P(Fp8Pick)], i32),
        "kiln_fp8_act_quant_plan": ([u32, u32, u32, i32, i32, P(Fp8Pick)], i32),
        "kiln_fp8_act_quant": ([void_p, void_p, void_p, void_p, u32, u32, void_p, P(Fp8Pick)], i32),
    }
    for name, (arguments, result) in signatures.items():
        function = getattr(lib, name)
        function.argtypes, function.restype = arguments, result
    return lib


def sized(struct_type):
    value = struct_type()
    value.struct_size = ctypes.sizeof(struct_type)
    return value


class Service:
    """One device's kiln service; close() (or the with block) destroys it."""

    def __init__(self, lib, ordinal=0):
        self.lib, self.handle = lib, ctypes.c_void_p()
        self.check(lib.kiln_service_create(ordinal, ctypes.byref(self.handle)))

    def check(self, status):
        if status != OK:
            raise KilnError(self.lib, status)

    def device_info(self):
        info = sized(DeviceInfo)
        self.check(self.lib.kiln_service_device_info(self.handle, ctypes.byref(info)))
        return info

    def pick(self, m, k):
        pick = sized(Fp8Pick)
        self.check(self.lib.kiln_fp8_act_quant_pick(self.handle, m, k, ctypes.byref(pick)))
        return pick

    def quantize(self, x, q, scales, stream):
        """x: CUDA bf16 [m, k]; q: CUDA float8_e4m3fn [m, k]; scales: CUDA float32 [m, k/128]."""
        m, k = x.shape
        pick = sized(Fp8Pick)
        self.check(self.lib.kiln_fp8_act_quant(self.handle, x.data_ptr(), q.data_ptr(), scales.data_ptr(), m, k,
                                               stream, ctypes.byref(pick)))
        return pick

    def close(self):
        if self.handle:
            self.lib.kiln_service_destroy(self.handle)
            self.handle = ctypes.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.close()


def expect(ok, what):
    print(f"{'ok' if ok else 'FAIL'}: {what}")
    if not ok:
        sys.exit(1)


def cpu_part(lib, service):
    major, minor, patch, abi = (ctypes.c_uint32() for _ in range(4))
    service.check(lib.kiln_version(ctypes.byref(major), ctypes.byref(minor), ctypes.byref(patch)))
    service.check(lib.kiln_abi_version(ctypes.byref(abi)))
    print(f"kiln {major.value}.{minor.value}.{patch.value}, C ABI {abi.value}")
    expect(abi.value == ABI_VERSION, "the library's ABI is the one this script declares")

    info = service.device_info()
    why = "" if info.available else f": {info.reason.decode()}"
    print(f"device {info.ordinal}: {info.name.decode()}, cc {info.cc_major}.{info.cc_minor}, {info.sm_count} SMs, "
          f"target '{info.target.decode()}', available {info.available}{why}")

    pick = service.pick(4096, 7168)
    print(f"pick m=4096 k=7168 here: {pick}")
    expect(pick.grid[0] == (4096 * 56 // 16 if pick.twin else 4096), "the pick's grid is its kernel's (twin: 16 groups a CTA)")
    plan = sized(Fp8Pick)
    service.check(lib.kiln_fp8_act_quant_plan(16, 5120, 132, 1, LEVER_ON, ctypes.byref(plan)))
    print(f"plan m=16 k=5120 on 132 SMs: {plan}")
    expect(plan.twin == 1 and plan.grid[0] == 40, "the twin fills an H200 at m=16, k=5120")
    service.check(lib.kiln_fp8_act_quant_plan(15, 5120, 132, 1, LEVER_ON, ctypes.byref(plan)))
    expect(plan.reject == REJECT_TOO_FEW_CTAS, "one row fewer is too few CTAs for the twin")
    try:
        service.pick(1, 100)
        expect(False, "k=100 is refused")
    except KilnError as error:
        expect(error.status == INVALID_ARGUMENT, "k=100 is refused")
        print(f"    ({error})")
    return info


def torch_reference(torch, x):
    """kiln's numerics in PyTorch: per 128-element group, absmax = max(amax |x|, 1e-10),
    scale = absmax / 448, q = e4m3(clamp(x / scale, -448, 448)) (round to nearest even)."""
    m, k = x.shape
    groups = x.float().view(m, k // 128, 128)
    # Why a device tensor: PyTorch divides by a Python scalar as a multiply by its reciprocal, which
    # can differ from true division in the last bit.
    scales = groups.abs().amax(dim=-1).clamp(min=1e-10) / torch.tensor(448.0, device=x.device)
    q = (groups / scales.unsqueeze(-1)).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return q.view(m, k), scales


def gpu_part(service, torch, ordinal):
    device = torch.device("cuda", ordinal)
    torch.manual_seed(0)
    for m, k in [(1, 128), (15, 5120), (16, 5120), (64, 7168), (4096, 5120)]:  # both arms on an H200
        # Magnitudes over many binades, so groups get different scales.
        x = (torch.randn(m, k, device=device) * torch.exp2(torch.randint(-20, 20, (m, 1), device=device).float()))
        x = x.to(torch.bfloat16)
        q = torch.full((m, k), 0xCD, dtype=torch.uint8, device=device).view(torch.float8_e4m3fn)
        scales = torch.full((m, k // 128), float("nan"), dtype=torch.float32, device=device)
        pick = service.quantize(x, q, scales, torch.cuda.current_stream(device).cuda_stream)
        torch.cuda.synchronize(device)
        q_ref, scales_ref = torch_reference(torch, x)
        print(f"launched m={m} k={k}: {pick}")
        expect(torch.equal(scales.view(torch.int32), scales_ref.view(torch.int32)),
               f"m={m} k={k}: scales equal PyTorch's bit for bit")
        expect(torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8)), f"m={m} k={k}: q equals PyTorch's byte for byte")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lib", default=os.environ.get("KILN_LIB", "libkiln.so"))
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--cpu-only", action="store_true")
    mode.add_argument("--gpu", action="store_true")
    args = parser.parse_args()

    lib = load(args.lib)
    with Service(lib, 0) as service:
        info = cpu_part(lib, service)
        if args.cpu_only:
            return 0
        try:
            import torch
        except ImportError:
            torch = None
        if not info.available or torch is None or not torch.cuda.is_available():
            print("GPU part: skipped, " + ("no usable GPU" if not info.available else "PyTorch with CUDA not importable"))
            return 77 if args.gpu else 0
        gpu_part(service, torch, info.ordinal)
        print("GPU part: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
