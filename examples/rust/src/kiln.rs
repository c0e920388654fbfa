//! kiln's C ABI (include/kiln/kiln.h), declared by hand, and a safe wrapper around one service.

use std::ffi::{c_char, c_void, CStr};
use std::fmt;
use std::ptr::NonNull;

mod ffi {
    use std::ffi::{c_char, c_void};

    pub const ABI_VERSION: u32 = 1;
    pub const OK: i32 = 0;

    #[repr(C)]
    pub struct Service {
        _opaque: [u8; 0],
    }

    #[repr(C)]
    pub struct DeviceInfo {
        pub struct_size: u32,
        pub ordinal: i32,
        pub cc_major: i32,
        pub cc_minor: i32,
        pub sm_count: u32,
        pub available: i32,
        pub name: [c_char; 256],
        pub target: [c_char; 32],
        pub reason: [c_char; 256],
    }

    #[repr(C)]
    pub struct Fp8Pick {
        pub struct_size: u32,
        pub twin: i32,
        pub kernel: u64,
        pub grid: [u32; 3],
        pub block: [u32; 3],
        pub reject: i32,
        pub requested: i32,
        pub entry: [c_char; 64],
        pub reason: [c_char; 128],
    }

    // The v1 sizes of kiln.h (KILN_*_V1_SIZE): a layout slip fails the build, not the run.
    const _: () = assert!(std::mem::size_of::<DeviceInfo>() == 568);
    const _: () = assert!(std::mem::size_of::<Fp8Pick>() == 240);

    extern "C" {
        pub fn kiln_last_error() -> *const c_char;
        pub fn kiln_status_string(status: i32) -> *const c_char;
        pub fn kiln_version(major: *mut u32, minor: *mut u32, patch: *mut u32) -> i32;
        pub fn kiln_abi_version(abi: *mut u32) -> i32;
        pub fn kiln_service_create(ordinal: i32, out: *mut *mut Service) -> i32;
        pub fn kiln_service_destroy(service: *mut Service) -> i32;
        pub fn kiln_service_device_info(service: *const Service, out: *mut DeviceInfo) -> i32;
        pub fn kiln_fp8_act_quant_pick(service: *mut Service, m: u32, k: u32, out: *mut Fp8Pick) -> i32;
        pub fn kiln_fp8_act_quant_plan(m: u32, k: u32, sm_count: u32, twin_present: i32, lever: i32,
                                       out: *mut Fp8Pick) -> i32;
        pub fn kiln_fp8_act_quant(service: *mut Service, x: *const c_void, q: *mut c_void, scales: *mut f32, m: u32,
                                  k: u32, stream: *mut c_void, out: *mut Fp8Pick) -> i32;
    }
}

/// A failed kiln call: its status and kiln_last_error().
#[derive(Debug)]
pub struct Error {
    pub status: i32,
    pub message: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // SAFETY: kiln_status_string returns a static NUL-terminated string.
        let name = unsafe { CStr::from_ptr(ffi::kiln_status_string(self.status)) };
        write!(f, "{}: {}", name.to_string_lossy(), self.message)
    }
}

fn check(status: i32) -> Result<(), Error> {
    if status == ffi::OK {
        return Ok(());
    }
    // SAFETY: never null, valid until the next kiln call on this thread; copied at once.
    let message = unsafe { CStr::from_ptr(ffi::kiln_last_error()) }.to_string_lossy().into_owned();
    Err(Error { status, message })
}

fn text(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// `(major, minor, patch, abi)` of the loaded library.
pub fn version() -> Result<(u32, u32, u32, u32), Error> {
    let (mut major, mut minor, mut patch, mut abi) = (0, 0, 0, 0);
    // SAFETY: valid pointers to locals.
    check(unsafe { ffi::kiln_version(&mut major, &mut minor, &mut patch) })?;
    check(unsafe { ffi::kiln_abi_version(&mut abi) })?;
    Ok((major, minor, patch, abi))
}

pub const ABI_VERSION: u32 = ffi::ABI_VERSION;
pub const LEVER_ON: i32 = 1;
pub const REJECT_TOO_FEW_CTAS: i32 = 3;

#[derive(Debug, Clone)]
pub struct DeviceInfo {
    pub ordinal: i32,
    pub cc: (i32, i32),
    pub sm_count: u32,
    pub available: bool,
    pub name: String,
    pub target: String,
    pub reason: String,
}

/// One launch decision of the FP8 quantizer.
#[derive(Debug, Clone)]
pub struct Pick {
    pub twin: bool,
    pub kernel: u64,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub reject: i32,
    pub entry: String,
    pub reason: String,
}

impl fmt::Display for Pick {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (handle {:#x}) grid {:?} block {:?}", self.entry, self.kernel, self.grid, self.block)?;
        if !self.twin {
            write!(f, ", not the twin: {}", self.reason)?;
        }
        Ok(())
    }
}

fn empty_pick() -> ffi::Fp8Pick {
    // SAFETY: a plain C struct; all zeros is a valid value.
    let mut raw: ffi::Fp8Pick = unsafe { std::mem::zeroed() };
    raw.struct_size = std::mem::size_of::<ffi::Fp8Pick>() as u32;
    raw
}

fn to_pick(raw: &ffi::Fp8Pick) -> Pick {
    Pick { twin: raw.twin != 0, kernel: raw.kernel, grid: raw.grid, block: raw.block, reject: raw.reject,
           entry: text(&raw.entry), reason: text(&raw.reason) }
}

/// The pick for a device that is not open: `sm_count` SMs, twin in the image or not, a lever.
pub fn plan(m: u32, k: u32, sm_count: u32, twin_present: bool, lever: i32) -> Result<Pick, Error> {
    let mut raw = empty_pick();
    // SAFETY: `raw` is a sized, writable kiln_fp8_pick.
    check(unsafe { ffi::kiln_fp8_act_quant_plan(m, k, sm_count, twin_present as i32, lever, &mut raw) })?;
    Ok(to_pick(&raw))
}

/// One device's kiln service; destroyed on drop.
pub struct Service(NonNull<ffi::Service>);

// SAFETY: kiln.h: every call may run on many threads at once; destroy runs only in Drop.
unsafe impl Send for Service {}
unsafe impl Sync for Service {}

impl Service {
    pub fn new(ordinal: i32) -> Result<Service, Error> {
        let mut raw = std::ptr::null_mut();
        // SAFETY: `raw` is a valid out pointer.
        check(unsafe { ffi::kiln_service_create(ordinal, &mut raw) })?;
        Ok(Service(NonNull::new(raw).expect("kiln_service_create returned OK and NULL")))
    }

    pub fn device_info(&self) -> Result<DeviceInfo, Error> {
        // SAFETY: a plain C struct; all zeros is a valid value.
        let mut raw: ffi::DeviceInfo = unsafe { std::mem::zeroed() };
        raw.struct_size = std::mem::size_of::<ffi::DeviceInfo>() as u32;
        check(unsafe { ffi::kiln_service_device_info(self.0.as_ptr(), &mut raw) })?;
        Ok(DeviceInfo { ordinal: raw.ordinal, cc: (raw.cc_major, raw.cc_minor), sm_count: raw.sm_count,
                        available: raw.available != 0, name: text(&raw.name), target: text(&raw.target),
                        reason: text(&raw.reason) })
    }

    pub fn pick(&self, m: u32, k: u32) -> Result<Pick, Error> {
        let mut raw = empty_pick();
        // SAFETY: the service is alive; `raw` is sized and writable.
        check(unsafe { ffi::kiln_fp8_act_quant_pick(self.0.as_ptr(), m, k, &mut raw) })?;
        Ok(to_pick(&raw))
    }

    /// Quantizes bf16 `x[m, k]` into e4m3 `q` and fp32 `scales[m, k/128]` on `stream`.
    ///
    /// # Safety
    /// `x`, `q` and `scales` are device pointers of this service's device with room for the shape,
    /// and stay valid until `stream` has run the launch.
    pub unsafe fn quantize(&self, x: *const c_void, q: *mut c_void, scales: *mut f32, m: u32, k: u32,
                           stream: *mut c_void) -> Result<Pick, Error> {
        let mut raw = empty_pick();
        check(ffi::kiln_fp8_act_quant(self.0.as_ptr(), x, q, scales, m, k, stream, &mut raw))?;
        Ok(to_pick(&raw))
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        // SAFETY: created by kiln_service_create, destroyed once, no call in flight (we own it).
        unsafe { ffi::kiln_service_destroy(self.0.as_ptr()) };
    }
}
