"""Host time per call, for the Python benchmarks (python_overhead.py, op_dispatch.py)."""
import time


def batch_samples(fn, batches, batch, synchronize=lambda: None):
    """Microseconds per call of `batches` batches of `batch` calls, each batch timed alone;
    `synchronize` runs before each batch and after the last, outside the timed loop (the GPU
    benchmark passes torch.cuda.synchronize, so the launch queue never fills)."""
    samples = []
    for _ in range(batches):
        synchronize()
        start = time.perf_counter_ns()
        for _ in range(batch):
            fn()
        samples.append((time.perf_counter_ns() - start) / batch / 1000)
    synchronize()
    return samples
