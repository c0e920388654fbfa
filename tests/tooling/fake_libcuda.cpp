// A libcuda.so.1 that is present but unusable, for tests/tooling/test_gpu_skip_policy.py: the GPU suite
// and `kiln selftest` must fail on it, not skip. Built twice:
//   KILN_FAKE_LACKS_REQUIRED: exports only the error, version and init calls, so the loader finds
//     a required entry missing (a driver too old, or a broken install);
//   otherwise: exports every entry the loader requires, and cuInit fails (the driver errors).
// No <cuda.h>: only the names matter to dlsym; the loader calls just the four defined first,
// each with the signature it has in <cuda.h> (CUresult is an int-sized enum).
extern "C" {

int cuGetErrorName(int, const char** name) {
  *name = "CUDA_ERROR_UNKNOWN";
  return 0;
}
int cuGetErrorString(int, const char** text) {
  *text = "fake driver: cuInit always fails";
  return 0;
}
int cuInit(unsigned int) { return 999; }  // CUDA_ERROR_UNKNOWN
int cuDriverGetVersion(int* version) {
  *version = 12040;
  return 0;
}

#ifndef KILN_FAKE_LACKS_REQUIRED
// Never called (cuInit fails first); 999 in case a loader change ever does.
int cuDeviceGetCount() { return 999; }
int cuDeviceGet() { return 999; }
int cuDeviceGetName() { return 999; }
int cuDeviceGetAttribute() { return 999; }
int cuDevicePrimaryCtxRetain() { return 999; }
int cuDevicePrimaryCtxGetState() { return 999; }
int cuDevicePrimaryCtxRelease_v2() { return 999; }
int cuCtxGetCurrent() { return 999; }
int cuCtxPushCurrent_v2() { return 999; }
int cuCtxPopCurrent_v2() { return 999; }
int cuModuleLoadDataEx() { return 999; }
int cuModuleUnload() { return 999; }
int cuModuleGetFunction() { return 999; }
int cuLaunchKernel() { return 999; }
#endif
}
