/* kiln from C11: create a service, print the device and a pick, and (with a GPU) quantize a bf16
 * buffer and check one group. Device memory comes from the CUDA driver, opened with dlopen, so
 * the example needs no CUDA headers.
 *
 *   quantize [--cpu-only | --gpu]
 *   default: the CPU part, then the GPU part when there is a GPU (exit 0 either way);
 *   --cpu-only: the CPU part only; --gpu: exit 77 (skipped) without a GPU. */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/kiln.h"

#define CHECK(call)                                                                                        \
  do {                                                                                                     \
    kiln_status status_ = (call);                                                                          \
    if (status_ != KILN_OK) {                                                                              \
      fprintf(stderr, "FAIL: %s: %s: %s\n", #call, kiln_status_string(status_), kiln_last_error());       \
      exit(1);                                                                                             \
    }                                                                                                      \
  } while (0)

static void expect(int ok, const char* what) {
  printf("%s: %s\n", ok ? "ok" : "FAIL", what);
  if (!ok) exit(1);
}

static void print_pick(const char* label, const kiln_fp8_pick* pick) {
  printf("%s: %s (handle 0x%llx) grid (%u, %u, %u) block (%u, %u, %u)%s%s\n", label, pick->entry,
         (unsigned long long)pick->kernel, pick->grid[0], pick->grid[1],
         pick->grid[2], pick->block[0], pick->block[1], pick->block[2], pick->twin ? "" : ", not the twin: ",
         pick->reason);
}

static void cpu_part(kiln_service* service, kiln_device_info* info) {
  uint32_t major, minor, patch, abi;
  kiln_fp8_pick pick;
  CHECK(kiln_version(&major, &minor, &patch));
  CHECK(kiln_abi_version(&abi));
  printf("kiln %u.%u.%u, C ABI %u\n", major, minor, patch, abi);
  expect(abi == KILN_ABI_VERSION, "the library's ABI is the one this program was built against");

  CHECK(kiln_service_device_info(service, info));
  printf("device %d: %s, cc %d.%d, %u SMs, target '%s', available %d%s%s\n", info->ordinal, info->name,
         info->cc_major, info->cc_minor, info->sm_count, info->target, info->available,
         info->available ? "" : ": ", info->reason);

  memset(&pick, 0, sizeof pick);
  pick.struct_size = sizeof pick;
  CHECK(kiln_fp8_act_quant_pick(service, 4096, 7168, &pick));
  print_pick("pick m=4096 k=7168 here", &pick);
  expect(pick.grid[0] == (pick.twin ? 4096 * 56 / 16 : 4096), "the pick's grid is its kernel's (twin: 16 groups a CTA)");
  CHECK(kiln_fp8_act_quant_plan(16, 5120, 132, 1, KILN_FP8_LEVER_ON, &pick));
  print_pick("plan m=16 k=5120 on 132 SMs", &pick);
  expect(pick.twin == 1 && pick.grid[0] == 40, "the twin fills an H200 at m=16, k=5120");
  CHECK(kiln_fp8_act_quant_plan(15, 5120, 132, 1, KILN_FP8_LEVER_ON, &pick));
  expect(pick.reject == KILN_FP8_REJECT_TOO_FEW_CTAS, "one row fewer is too few CTAs for the twin");

  expect(kiln_fp8_act_quant_pick(service, 1, 100, &pick) == KILN_ERROR_INVALID_ARGUMENT, "k=100 is refused");
  printf("    (%s)\n", kiln_last_error());
}

/* The few driver calls this example needs, resolved by name. */
typedef int (*cu_fn)();
static const char* const CU_NAMES[] = {"cuInit", "cuDeviceGet", "cuDevicePrimaryCtxRetain", "cuCtxSetCurrent",
                                       "cuMemAlloc_v2", "cuMemFree_v2", "cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2",
                                       "cuCtxSynchronize", "cuDevicePrimaryCtxRelease_v2"};
enum { CU_INIT, CU_DEVICE_GET, CU_RETAIN, CU_SET_CURRENT, CU_ALLOC, CU_FREE, CU_HTOD, CU_DTOH, CU_SYNC, CU_RELEASE, CU_COUNT };
static cu_fn cu[CU_COUNT];

static void cu_check(int result, const char* call) {
  if (result != 0) {
    fprintf(stderr, "FAIL: %s returned CUresult %d\n", call, result);
    exit(1);
  }
}

static float bf16_to_float(uint16_t bits) {
  uint32_t word = (uint32_t)bits << 16;
  float value;
  memcpy(&value, &word, sizeof value);
  return value;
}

static float e4m3_to_float(uint8_t code) {
  int exponent = (code >> 3) & 0xF, mantissa = code & 7;
  float magnitude = exponent == 0 ? ldexpf((float)mantissa, -9) : ldexpf(1.0f + mantissa / 8.0f, exponent - 7);
  return (code & 0x80) ? -magnitude : magnitude;
}

/* Half an e4m3 step at |v| (<= 448): the most round-to-nearest may move a value. */
static float e4m3_half_step(float v) {
  int exponent;
  frexpf(fabsf(v), &exponent); /* |v| in [2^(exponent-1), 2^exponent) */
  return exponent - 1 < -6 ? ldexpf(1.0f, -10) : ldexpf(1.0f, exponent - 1 - 4);
}

static int gpu_part(kiln_service* service, const kiln_device_info* info) {
  enum { M = 64, K = 5120, GROUPS = K / 128 };
  size_t i, row = 5, group = 17;
  void* libcuda = dlopen("libcuda.so.1", RTLD_NOW);
  uint16_t* x = malloc(sizeof(uint16_t) * M * K);
  uint8_t* q = malloc(M * K);
  float scales[M * GROUPS], absmax = 0.0f, scale;
  unsigned long long dx, dq, ds;
  void* context;
  int device;
  uint32_t state = 12345;
  kiln_fp8_pick pick;

  if (libcuda == NULL || x == NULL || q == NULL) return fprintf(stderr, "FAIL: dlopen or malloc\n"), 1;
  for (i = 0; i < CU_COUNT; ++i) {
    *(void**)(&cu[i]) = dlsym(libcuda, CU_NAMES[i]);
    if (cu[i] == NULL) return fprintf(stderr, "FAIL: libcuda lacks %s\n", CU_NAMES[i]), 1;
  }
  cu_check(((int (*)(unsigned))cu[CU_INIT])(0), "cuInit");
  cu_check(((int (*)(int*, int))cu[CU_DEVICE_GET])(&device, info->ordinal), "cuDeviceGet");
  cu_check(((int (*)(void**, int))cu[CU_RETAIN])(&context, device), "cuDevicePrimaryCtxRetain");
  cu_check(((int (*)(void*))cu[CU_SET_CURRENT])(context), "cuCtxSetCurrent");

  for (i = 0; i < (size_t)M * K; ++i) { /* bf16 of magnitude in [1, 16), random sign: an LCG's bits */
    state = state * 1664525u + 1013904223u;
    x[i] = (uint16_t)(0x3F80u + ((state >> 16) & 0x01FFu)) | (uint16_t)((state >> 31) << 15);
  }
  cu_check(((int (*)(unsigned long long*, size_t))cu[CU_ALLOC])(&dx, sizeof(uint16_t) * M * K), "cuMemAlloc");
  cu_check(((int (*)(unsigned long long*, size_t))cu[CU_ALLOC])(&dq, (size_t)M * K), "cuMemAlloc");
  cu_check(((int (*)(unsigned long long*, size_t))cu[CU_ALLOC])(&ds, sizeof scales), "cuMemAlloc");
  cu_check(((int (*)(unsigned long long, const void*, size_t))cu[CU_HTOD])(dx, x, sizeof(uint16_t) * M * K),
           "cuMemcpyHtoD");

  memset(&pick, 0, sizeof pick);
  pick.struct_size = sizeof pick;
  CHECK(kiln_fp8_act_quant(service, (const void*)(uintptr_t)dx, (void*)(uintptr_t)dq, (float*)(uintptr_t)ds, M, K,
                           NULL, &pick));
  print_pick("launched m=64 k=5120", &pick);
  cu_check(((int (*)(void))cu[CU_SYNC])(), "cuCtxSynchronize");
  cu_check(((int (*)(void*, unsigned long long, size_t))cu[CU_DTOH])(q, dq, (size_t)M * K), "cuMemcpyDtoH");
  cu_check(((int (*)(void*, unsigned long long, size_t))cu[CU_DTOH])(scales, ds, sizeof scales), "cuMemcpyDtoH");

  /* One group: the scale is absmax/448 exactly; each q, decoded, is x/scale to within half a step. */
  for (i = 0; i < 128; ++i) absmax = fmaxf(absmax, fabsf(bf16_to_float(x[row * K + group * 128 + i])));
  scale = fmaxf(absmax, 1e-10f) / 448.0f;
  expect(scales[row * GROUPS + group] == scale, "group (5, 17): scale == absmax / 448");
  for (i = 0; i < 128; ++i) {
    float v = bf16_to_float(x[row * K + group * 128 + i]) / scale;
    float got = e4m3_to_float(q[row * K + group * 128 + i]);
    if (fabsf(got - v) > e4m3_half_step(v)) {
      fprintf(stderr, "FAIL: element %zu: x/scale %g, q decodes to %g\n", i, v, got);
      return 1;
    }
  }
  expect(1, "group (5, 17): every q is x/scale rounded to e4m3");

  ((int (*)(unsigned long long))cu[CU_FREE])(dx);
  ((int (*)(unsigned long long))cu[CU_FREE])(dq);
  ((int (*)(unsigned long long))cu[CU_FREE])(ds);
  ((int (*)(int))cu[CU_RELEASE])(device);
  free(x);
  free(q);
  return 0;
}

int main(int argc, char** argv) {
  int cpu_only = argc > 1 && strcmp(argv[1], "--cpu-only") == 0;
  int gpu_required = argc > 1 && strcmp(argv[1], "--gpu") == 0;
  kiln_service* service = NULL;
  kiln_device_info info;
  int result = 0;

  CHECK(kiln_service_create(0, &service));
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  cpu_part(service, &info);
  if (!cpu_only) {
    if (info.available)
      result = gpu_part(service, &info);
    else if (gpu_required)
      result = 77;
    printf("GPU part: %s\n", info.available ? (result == 0 ? "passed" : "FAILED") : "skipped, no usable GPU");
  }
  CHECK(kiln_service_destroy(service));
  return result;
}
