"""Arrays from other frameworks (CuPy, JAX, anything with `__dlpack__`): viewed as torch tensors
without a copy, so they take the same checks and the same op. Results are torch tensors; the
caller's framework takes them back with its own `from_dlpack` (e.g. `cupy.from_dlpack(q)`)."""

import torch


def as_tensor(value, name: str):
    if value is None or isinstance(value, torch.Tensor):
        return value
    if not hasattr(value, "__dlpack__"):
        raise TypeError(f"{name}: expected a torch.Tensor or an object with __dlpack__, got {type(value).__name__}")
    # Why torch.from_dlpack: it passes PyTorch's current stream to the producer's __dlpack__, so
    # the producer orders its pending work before the kernel that reads it.
    return torch.from_dlpack(value)
