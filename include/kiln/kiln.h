#ifndef KILN_KILN_H
#define KILN_KILN_H
/**
 * @file
 * kiln's C ABI: the kernel service for callers that are not C++ (Rust, Python through ctypes, C).
 * Valid C11 and C++; plain C types only.
 *
 * Conventions, once for every function here:
 * - Every function returns a `kiln_status` (an `int32_t`) except kiln_last_error() and
 *   kiln_status_string(). `KILN_OK` is 0; on any other status the function's outputs are left as
 *   documented (pointers to handles are set to 0/NULL) and kiln_last_error() says what went wrong.
 * - A NULL pointer where a pointer is required, and any invalid value, give
 *   `KILN_ERROR_INVALID_ARGUMENT`, never a crash. No C++ exception leaves a kiln_ function.
 * - Output structs carry `struct_size` first: the caller zeroes the struct and sets
 *   `struct_size = sizeof(struct)`. kiln accepts any size at least the version-1 size
 *   (`KILN_*_V1_SIZE`), fills what both it and the caller know, and leaves later bytes alone, so
 *   callers and libraries of different versions can grow the structs.
 * - Threads: every function may be called from many threads at once, on the same service too,
 *   except kiln_service_destroy(), which must not race any other call on that service.
 * - Devices and contexts: a service uses its device's primary context (the one the CUDA runtime
 *   and PyTorch use), so pointers and streams from those work as they are.
 */

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Why: libkiln is built with hidden visibility; every function declared here is its C ABI and is
   exported (docs/architecture.md, "What the library exports"). */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

/** Version of this ABI: bumped on any incompatible change. Compare with kiln_abi_version(). */
#define KILN_ABI_VERSION 1u

/** Status codes. The values are stable. */
typedef int32_t kiln_status;
#define KILN_OK 0                          /**< success */
#define KILN_ERROR_INVALID_ARGUMENT 1      /**< a NULL pointer, a bad value, a struct too small */
#define KILN_ERROR_UNAVAILABLE 2           /**< no driver, no GPU, or no kernel for this device */
#define KILN_ERROR_DRIVER 3                /**< a CUDA driver call failed */
#define KILN_ERROR_COMPILE 4               /**< NVRTC failed */
#define KILN_ERROR_OUT_OF_MEMORY 5         /**< host memory ran out */
#define KILN_ERROR_INTERNAL 6              /**< anything else: a setup error (bad KILN_ARCH) or a bug */

/** Why the Hopper twin of the FP8 quantizer does not run (`kiln_fp8_pick::reject`). Stable. */
#define KILN_FP8_REJECT_NONE 0           /**< the twin runs */
#define KILN_FP8_REJECT_ABSENT 1         /**< the twin is not in this device's image */
#define KILN_FP8_REJECT_NOT_REQUESTED 2  /**< KILN_FP8_ACT_QUANT_HOPPER=0 (or the lever passed) */
#define KILN_FP8_REJECT_TOO_FEW_CTAS 3   /**< too few CTAs to fill the device */
#define KILN_FP8_REJECT_MISALIGNED 4     /**< x or q not 16-byte aligned */

/** The lever values kiln_fp8_act_quant_plan() takes. */
#define KILN_FP8_LEVER_PROCESS (-1) /**< the process's KILN_FP8_ACT_QUANT_HOPPER (default on) */
#define KILN_FP8_LEVER_OFF 0
#define KILN_FP8_LEVER_ON 1

/** One device (a kiln::Service): its primary context, target, loaded modules and quantizer. */
typedef struct kiln_service kiln_service;

/** A device as kiln sees it. */
typedef struct kiln_device_info {
  uint32_t struct_size; /**< in: set by the caller, at least KILN_DEVICE_INFO_V1_SIZE */
  int32_t ordinal;      /**< the service's device ordinal */
  int32_t cc_major;     /**< compute capability; 0 when the device could not be read */
  int32_t cc_minor;
  uint32_t sm_count;    /**< 0 when the device could not be read */
  int32_t available;    /**< 1: kernels can load and run; 0: every handle is 0 (see `reason`) */
  char name[256];       /**< the driver's device name; "" when unread. NUL-terminated */
  char target[32];      /**< the compile target, e.g. "sm_90a"; "" when none. NUL-terminated */
  char reason[256];     /**< why not available; "" when available. NUL-terminated, may be cut */
} kiln_device_info;
#define KILN_DEVICE_INFO_V1_SIZE 568u

/**
 * One launch decision of the FP8 activation quantizer: kernel and grid always belong together.
 * A pick never describes a launch that cannot happen: a shape kiln_fp8_act_quant() refuses is
 * refused by the pick and the plan too, with the same status and message, and an empty shape
 * (`m == 0` or `k == 0`) is a no-op: `noop` 1, grid (0, 0, 0), `twin` 0, `reject`
 * KILN_FP8_REJECT_NONE, `entry` and `reason` "" (a version-1 caller, without `noop`, sees the zero
 * grid and the empty entry).
 */
typedef struct kiln_fp8_pick {
  uint32_t struct_size; /**< in: set by the caller, at least KILN_FP8_PICK_V1_SIZE */
  int32_t twin;         /**< 1 when the Hopper twin runs, 0 when the shared kernel runs (or nothing) */
  uint64_t kernel;      /**< the handle launched; 0 when no kernel is available (or from a plan, or a no-op) */
  uint32_t grid[3];     /**< grid of that kernel; (0, 0, 0) for a no-op */
  uint32_t block[3];    /**< block of that kernel: (128, 1, 1) */
  int32_t reject;       /**< KILN_FP8_REJECT_*: why not the twin */
  int32_t requested;    /**< the lever value this pick used (1 on, 0 off) */
  char entry[64];       /**< entry point that runs: "per_token_group_quant_fp8[_hopper]"; "" for a no-op */
  char reason[128];     /**< text of `reject`; "" when the twin runs. NUL-terminated */
  /* Version 2 (KILN_FP8_PICK_V2_SIZE); a caller with the version-1 size gets the fields above. */
  int32_t noop;         /**< 1: `m == 0` or `k == 0`, nothing is launched; 0: `kernel` runs on `grid` */
  uint32_t reserved;    /**< 0; keeps the size a multiple of 8 with no hidden padding */
} kiln_fp8_pick;
#define KILN_FP8_PICK_V1_SIZE 240u
#define KILN_FP8_PICK_V2_SIZE 248u

/** Disk cache modes (`kiln_cache_stats::disk_mode`). */
#define KILN_DISK_CACHE_DISABLED 0    /**< turned off (KILN_CACHE=0) */
#define KILN_DISK_CACHE_MEMORY_ONLY 1 /**< configured, but the folder is unusable */
#define KILN_DISK_CACHE_READ_WRITE 2  /**< in use */

/** Cache counters, monotonic since the service (memory) or the process (disk) started. */
typedef struct kiln_cache_stats {
  uint32_t struct_size; /**< in: set by the caller, at least KILN_CACHE_STATS_V1_SIZE */
  int32_t disk_mode;    /**< KILN_DISK_CACHE_* */
  /* This service's device (its memory cache). */
  uint64_t memory_hits;       /**< lookups answered from memory at once */
  uint64_t memory_lock_waits; /**< lookups that waited for another thread loading the module */
  uint64_t disk_loads;        /**< binaries read from the disk cache */
  uint64_t compiles;          /**< binaries compiled by NVRTC */
  uint64_t load_refused;      /**< binaries the driver refused as bad images */
  uint64_t failures;          /**< modules that ended failed (their handles are 0) */
  double compile_ms;          /**< total NVRTC time of those compiles */
  /* The process's disk cache (shared by every service of the process). */
  uint64_t disk_hits;
  uint64_t disk_misses;
  uint64_t disk_compiles;   /**< compiles run through the disk cache, by any service */
  uint64_t corrupt_healed;  /**< bad entries found and deleted */
  uint64_t rejected;        /**< entries removed because the driver refused them */
  uint64_t disk_lock_waits; /**< another process held the entry's lock at first */
  uint64_t lock_timeouts;   /**< gave up waiting and compiled without the lock */
  uint64_t lock_failures;   /**< no working file lock: compiled without it */
  uint64_t evictions;       /**< entries removed to stay under KILN_CACHE_MAX_BYTES */
  uint64_t store_failures;  /**< entries that could not be written */
  /* Version 2: the process's remote (Redis) tier, KILN_REMOTE_CACHE; all 0 when it is off. */
  int32_t remote_enabled;            /**< 1: the remote tier is in use */
  int32_t remote_signed;             /**< 1: entries are signed and must be (KILN_REMOTE_CACHE_KEY_FILE) */
  uint64_t remote_hits;              /**< verified entries read from Redis */
  uint64_t remote_misses;            /**< lookups that ended compiling here */
  uint64_t remote_compiles;          /**< compiles run behind the remote tier */
  uint64_t remote_publishes;         /**< entries this process wrote first */
  uint64_t remote_publish_lost;      /**< publishes another node had already made */
  uint64_t remote_lease_waits;       /**< waits for another node's compile */
  uint64_t remote_lease_takeovers;   /**< leases taken over from a vanished holder */
  uint64_t remote_wait_timeouts;     /**< waits that ran out: compiled here */
  uint64_t remote_signature_failures;/**< values without a valid signature (never loaded) */
  uint64_t remote_corrupt;           /**< values that failed verification (never loaded) */
  uint64_t remote_timeouts;          /**< connects or commands past their timeout */
  uint64_t remote_errors;            /**< other Redis failures (refused, lost, auth, garbage) */
  uint64_t remote_skipped;           /**< commands not sent while the tier rested after a failure */
} kiln_cache_stats;
#define KILN_CACHE_STATS_V1_SIZE 144u
#define KILN_CACHE_STATS_V2_SIZE 256u

/**
 * The message of the last failed kiln call on this thread, "" after a successful one.
 * Never NULL. Owned by kiln; valid until the next kiln call on this thread (copy it to keep it).
 */
const char* kiln_last_error(void);

/** A static English name of `status`, e.g. "invalid argument"; "unknown status" for others. */
const char* kiln_status_string(kiln_status status);

/** The library's version (e.g. 0.1.0) into `*major`, `*minor`, `*patch`; none may be NULL. */
kiln_status kiln_version(uint32_t* major, uint32_t* minor, uint32_t* patch);

/** The library's KILN_ABI_VERSION into `*abi` (not NULL). A caller built against another value
 *  must not use the library. */
kiln_status kiln_abi_version(uint32_t* abi);

/**
 * Creates the service of device `ordinal` and stores it in `*out` (not NULL; set to NULL on
 * failure). The caller owns it and frees it with kiln_service_destroy().
 *
 * Without a CUDA driver (or when the device cannot be used), any `ordinal` >= 0 still gives a
 * service: kiln_service_device_info() reports `available == 0` with the reason, the pick and plan
 * work, kernel handles are 0 and kiln_fp8_act_quant() returns KILN_ERROR_UNAVAILABLE.
 * KILN_ERROR_INVALID_ARGUMENT for a negative ordinal, or one past the driver's device count;
 * KILN_ERROR_INTERNAL for a bad KILN_ARCH.
 */
kiln_status kiln_service_create(int32_t ordinal, kiln_service** out);

/** Destroys `service` (NULL: nothing happens), unloading its modules. No call on it may run. */
kiln_status kiln_service_destroy(kiln_service* service);

/** Fills `*out` (not NULL, `struct_size` set) with the service's device. */
kiln_status kiln_service_device_info(const kiln_service* service, kiln_device_info* out);

/**
 * The handle of kernel `entry` in embedded module `module` (NUL-terminated, not NULL) into
 * `*handle` (not NULL), compiling and loading the module on first use. KILN_OK with handle 0 when
 * the kernel is unavailable: unknown module or entry, failed compile (logged once), no GPU.
 * A handle is meaningful only to the service that returned it.
 */
kiln_status kiln_try_kernel(kiln_service* service, const char* module, const char* entry, uint64_t* handle);

/** As kiln_try_kernel(), but handle 0 without compiling when the device's target does not carry
 *  the module's family (the Hopper twin on a non-Hopper GPU). */
kiln_status kiln_try_target_kernel(kiln_service* service, const char* module, const char* entry,
                                   uint64_t* handle);

/**
 * Which FP8 quantizer kernel this service launches for row-major bf16 `[m, k]` with 16-byte
 * aligned pointers, on which grid, and why not the other, into `*out` (not NULL, `struct_size`
 * set). Resolves the kernels on first use (compiles or loads them). `m == 0` or `k == 0` is a
 * no-op pick (`noop`). KILN_ERROR_INVALID_ARGUMENT, naming the limit as kiln_fp8_act_quant() does,
 * for `k` not a multiple of 128, `m` > 2^31-1, and `k/128` > 65535 when the shared kernel would
 * run; `*out` is then unchanged.
 * Without a GPU: `kernel` 0, the shared kernel's grid, reject KILN_FP8_REJECT_ABSENT (for a shape
 * that is not a no-op).
 */
kiln_status kiln_fp8_act_quant_pick(kiln_service* service, uint32_t m, uint32_t k, kiln_fp8_pick* out);

/**
 * The pick for a device that has not been opened: `sm_count` SMs (0 counts as 1), the twin in
 * its image or not (`twin_present` 1 or 0), the shared kernel always there, and `lever`
 * (KILN_FP8_LEVER_*). Pure; `kernel` is 0. No-ops and refusals as kiln_fp8_act_quant_pick().
 * For planning and tests.
 */
kiln_status kiln_fp8_act_quant_plan(uint32_t m, uint32_t k, uint32_t sm_count, int32_t twin_present, int32_t lever,
                                    kiln_fp8_pick* out);

/**
 * Quantizes row-major bf16 `x[m, k]` into e4m3 `q[m, k]` and fp32 `scales[m, k/128]` (one per 128
 * elements, absmax/448), on `stream` (a CUstream or cudaStream_t of this device; NULL: the legacy
 * default stream). Asynchronous: the caller synchronizes the stream before reading outputs or
 * freeing inputs. `x`, `q`, `scales` are device pointers the caller owns (x 2-byte and scales
 * 4-byte aligned; x and q 16-byte aligned lets the Hopper twin run). `m == 0` or `k == 0`
 * launches nothing. `out` may be NULL; otherwise (`struct_size` set) it receives the pick used.
 * KILN_ERROR_INVALID_ARGUMENT for NULL or misaligned pointers, `k` not a multiple of 128 and
 * shapes past the grid limits; KILN_ERROR_UNAVAILABLE when the device has no quantizer;
 * KILN_ERROR_DRIVER when the launch fails.
 * This is the seed's quantizer exactly: its two kernels (the shared kernel, and the Hopper twin
 * on sm_90) and its pick. On GPUs without the twin its shared kernel is bound by how fast the
 * GPU starts CTAs; kiln_quant() with the default kiln_quant_params computes the same bytes with
 * the fastest kernel on every GPU (kiln_quant_get_pick() says which).
 */
kiln_status kiln_fp8_act_quant(kiln_service* service, const void* x, void* q, float* scales, uint32_t m,
                               uint32_t k, void* stream, kiln_fp8_pick* out);

/** The quantizer family's input element types, output codes and scale layouts. Stable. */
#define KILN_QUANT_IN_BF16 0
#define KILN_QUANT_IN_FP16 1
#define KILN_QUANT_IN_FP32 2
#define KILN_QUANT_OUT_E4M3 0 /**< fp8 e4m3, +-448 */
#define KILN_QUANT_OUT_INT8 1 /**< int8, scale absmax/127 */
#define KILN_QUANT_SCALES_ROW 0          /**< fp32 [m, k/group] */
#define KILN_QUANT_SCALES_COL 1          /**< fp32, memory order [k/group, m] */
#define KILN_QUANT_SCALES_COL_TMA 2      /**< fp32 [k/group, m padded to 4] */
#define KILN_QUANT_SCALES_UE8M0_PACKED 3 /**< int32 [ceil(k/group/4), m padded to 4], 4 exponents each */

/** kiln_quant_params.flags: launch with programmatic dependent launch (PDL, sm_90 and later): the
 *  kernel may start while the previous kernel on the stream finishes and waits in-kernel for its
 *  results, hiding launch latency between back-to-back kernels. Same results; ignored on older
 *  GPUs. KILN_PDL=1 turns it on for every call of the process. */
#define KILN_QUANT_FLAG_PDL 1u

/**
 * One variant of the quantizer family and the call's options (kiln::ops::QuantVariant and
 * QuantArgs; kiln/ops/group_quant.hpp states the numerics and layouts). Fill it with
 * kiln_quant_params_init(), then change what differs: a later library reads only the bytes the
 * caller's `struct_size` covers and takes defaults for the rest.
 */
typedef struct kiln_quant_params {
  uint32_t struct_size;  /**< in: at least KILN_QUANT_PARAMS_V1_SIZE */
  int32_t input;         /**< KILN_QUANT_IN_* (default bf16) */
  uint32_t group;        /**< 32, 64 or 128 (default 128) */
  int32_t output;        /**< KILN_QUANT_OUT_* (default e4m3) */
  int32_t scales;        /**< KILN_QUANT_SCALES_* (default row) */
  int32_t ue8m0;         /**< 1: power-of-two scales (needed by UE8M0_PACKED); default 0 */
  int32_t silu_and_mul;  /**< 1: x is [m, 2k], quantize silu(x[:, :k]) * x[:, k:]; default 0 */
  float eps;             /**< floor of a group's max |x|: finite, >= 0 (default 1e-10) */
  uint64_t x_row_stride; /**< elements between rows of x; 0: dense (default) */
  uint32_t flags;        /**< KILN_QUANT_FLAG_* bits (default 0) */
  uint32_t reserved;     /**< 0 (anything else: KILN_ERROR_INVALID_ARGUMENT) */
  /* Version 2: a batch of experts (MoE); see kiln_quant(). */
  uint64_t experts;         /**< 1..65535: x is [experts, m, ...]; 0: one [m, k] matrix (default) */
  uint64_t x_expert_stride; /**< elements between experts' first rows of x; 0: dense (default) */
  const int32_t* masked_m;  /**< device int32 [experts]: valid rows per expert; NULL: all m (default) */
} kiln_quant_params;
#define KILN_QUANT_PARAMS_V1_SIZE 48u
#define KILN_QUANT_PARAMS_V2_SIZE 72u

/** Fills `*params` (not NULL) with the defaults (the seed variant: bf16, 128, e4m3, row-major
 *  fp32 scales, eps 1e-10, dense rows) and `struct_size = sizeof(kiln_quant_params)`. */
kiln_status kiln_quant_params_init(kiln_quant_params* params);

/** Bytes the scales buffer of `params`' layout needs for `[m, k]` into `*bytes` (not NULL); for a
 *  batch (`params->experts` > 0), `experts` blocks of that size, one per expert.
 *  KILN_ERROR_INVALID_ARGUMENT for an impossible variant, `k` not a multiple of the group, `m` >
 *  2^31-1 or a size past 2^64 bytes. */
kiln_status kiln_quant_scales_bytes(const kiln_quant_params* params, uint64_t m, uint64_t k, uint64_t* bytes);

/**
 * Resolves the variant on the service's device now (compiles or loads its module; nothing else),
 * so that a later kiln_quant() (in a CUDA graph capture, on a latency path) finds it in memory.
 * Every kernel a call of the variant can run on this device is loaded (for the default variant:
 * the twin on sm_90, the shared kernel, and the family module, which also takes the calls the seed
 * kernels cannot); with `params->experts` > 0, the variant's batched form instead.
 * KILN_ERROR_INVALID_ARGUMENT for an impossible combination (the message names the parameter and
 * the allowed values); KILN_ERROR_UNAVAILABLE when the device lacks a kernel a call of it can need.
 */
kiln_status kiln_quant_prepare(kiln_service* service, const kiln_quant_params* params);

/**
 * Quantizes `x` (`m` rows of `params->input`, row stride `params->x_row_stride` elements) into
 * codes `q[m, k]` and `scales` (kiln_quant_scales_bytes() bytes, the layout of `params->scales`)
 * with the variant `params` names, on `stream` (a CUstream of this device; NULL: the legacy default
 * stream). Asynchronous. Device pointers: `x` 16-byte aligned (row stride bytes a multiple of 16),
 * `q` 16-byte (8-byte for fp32 input), `scales` 4-byte. `m == 0` or `k == 0` launches nothing.
 * The first call of a variant on a device compiles or loads that variant's module only.
 * KILN_ERROR_INVALID_ARGUMENT (naming the argument, what was expected and the range) for
 * impossible variants, bad shapes, strides and pointers; KILN_ERROR_UNAVAILABLE when the device
 * has no kernel for the variant; KILN_ERROR_DRIVER when the launch fails.
 *
 * A batch of experts (`params->experts` > 0, MoE): `x` is [experts, m, row stride] with
 * `params->x_expert_stride` elements between experts (0: dense), `q` [experts, m, k] dense, and
 * `scales` one block of kiln_quant_scales_bytes() / experts bytes per expert in the variant's
 * layout over `m` rows. With `params->masked_m` (device int32 [experts], 4-byte aligned, read by
 * the kernel after the prior work on `stream`: no host sync, capturable in a CUDA graph), expert e
 * has rows [0, min(masked_m[e], m)), none when negative; its other rows of `q` and `scales`,
 * padding included, are neither read nor written. The first batched call of a variant compiles or
 * loads its batched module (`per_token_group_quant_batched-...`).
 */
kiln_status kiln_quant(kiln_service* service, const kiln_quant_params* params, const void* x, void* q, void* scales,
                       uint64_t m, uint64_t k, void* stream);

/** The kernels a kiln_quant() call can run: kiln_quant_pick::kernel_kind and the index of its
 *  `why`. Stable. */
#define KILN_QUANT_KERNEL_TWIN 0              /**< the seed's Hopper twin (default variant, sm_90) */
#define KILN_QUANT_KERNEL_SHARED 1            /**< the seed's shared kernel (default variant) */
#define KILN_QUANT_KERNEL_FAMILY_TWO_GROUPS 2 /**< the family kernel, two groups per slot */
#define KILN_QUANT_KERNEL_FAMILY_ONE_GROUP 3  /**< the family kernel, one group per slot */
#define KILN_QUANT_KERNEL_COUNT 4

/** Why a candidate runs or does not (kiln_quant_pick::why); kiln_quant_pick::reason has the words.
 *  Stable. */
#define KILN_QUANT_WHY_CHOSEN_BY_CALLER 0
#define KILN_QUANT_WHY_SEED_VARIANT_ONLY 1     /**< twin, shared: only the default variant has them */
#define KILN_QUANT_WHY_NOT_SHIPPED 2           /**< two groups: the variant ships one group per slot */
#define KILN_QUANT_WHY_OUTSIDE_SEED_KERNELS 3  /**< eps other than 1e-10, strided rows, or k/128 > 65535 */
#define KILN_QUANT_WHY_ABSENT 4                /**< not in this device's image (the twin: sm_90 only) */
#define KILN_QUANT_WHY_TWIN_NOT_REQUESTED 5    /**< KILN_FP8_ACT_QUANT_HOPPER=0 */
#define KILN_QUANT_WHY_TWIN_TOO_FEW_CTAS 6     /**< the twin's grid is below the CTA floor */
#define KILN_QUANT_WHY_TWIN_MISALIGNED 7       /**< x or q not 16-byte aligned */
#define KILN_QUANT_WHY_TWIN_FILLS_DEVICE 8     /**< the twin's grid reaches the floor: the twin runs */
#define KILN_QUANT_WHY_DEVICE_PREFERS_FAMILY 9 /**< the device's rule: the family kernel is faster */
#define KILN_QUANT_WHY_DEVICE_PREFERS_SHARED 10 /**< the device's rule: the shared kernel is faster */
#define KILN_QUANT_WHY_ONE_GROUP_SMALL_GRID 11 /**< one group per slot: within 64 CTAs per SM */
#define KILN_QUANT_WHY_ONE_GROUP_LARGE_GRID 12 /**< two groups per slot: one would pass 64 CTAs per SM */
#define KILN_QUANT_WHY_ONE_GROUP_LEVER_OFF 13  /**< two groups per slot: KILN_Q_ONE_GROUP=0 */
#define KILN_QUANT_WHY_SM_COUNT_UNKNOWN 14     /**< two groups per slot: the SM count is unknown */
#define KILN_QUANT_WHY_ONLY_KERNEL 15          /**< the variant's only kernel for this call */
#define KILN_QUANT_WHY_SHARED_SMALL_GRID 16    /**< below the CTA floor: the shared kernel, the faster there */
#define KILN_QUANT_WHY_BATCHED 17              /**< a batch of experts: the family's batched kernel runs */

/**
 * Which kernel a kiln_quant() call of `params` with 16-byte aligned `x` and `q` runs on this
 * service's device, on which grid and block, and why each other candidate does not: the one pick
 * every kiln_quant() call goes through, for every variant. `m == 0` or `k == 0` is a no-op
 * (`noop` 1, `kernel_kind` -1). A shape or variant kiln_quant() refuses is refused here with the
 * same status and message.
 */
typedef struct kiln_quant_pick {
  uint32_t struct_size; /**< in: set by the caller, at least KILN_QUANT_PICK_V1_SIZE */
  int32_t noop;         /**< 1: nothing runs */
  int32_t kernel_kind;  /**< KILN_QUANT_KERNEL_*: the kernel that runs; -1 for a no-op */
  uint32_t reserved;    /**< 0 */
  uint64_t kernel;      /**< its handle; 0 while it is not loaded (the call loads it), or a no-op */
  uint32_t grid[3];     /**< its grid */
  uint32_t block[3];    /**< its block: (128, 1, 1) for the seed's kernels, (256, 1, 1) for the family's */
  int32_t why[KILN_QUANT_KERNEL_COUNT]; /**< KILN_QUANT_WHY_* for each candidate: why it runs, or why not */
  char entry[64];       /**< the entry point that runs; "" for a no-op. NUL-terminated */
  char reason[160];     /**< the words of why[kernel_kind]; "" for a no-op. NUL-terminated, may be cut */
} kiln_quant_pick;
#define KILN_QUANT_PICK_V1_SIZE 288u

kiln_status kiln_quant_get_pick(kiln_service* service, const kiln_quant_params* params, uint64_t m, uint64_t k,
                                kiln_quant_pick* out);

/** Fills `*out` (not NULL, `struct_size` set) with this service's memory-cache counters and the
 *  process's disk-cache and remote-tier counters (v2 fields; a v1-sized struct gets v1 only). */
kiln_status kiln_service_cache_stats(const kiln_service* service, kiln_cache_stats* out);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KILN_KILN_H */
