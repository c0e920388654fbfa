//! The few CUDA driver calls the example needs for device memory, from `libcuda.so.1` at run
//! time (kiln offers no memory calls: embedders bring their own).

use std::ffi::{c_char, c_int, c_void, CStr};

extern "C" {
    fn dlopen(filename: *const c_char, flags: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}
const RTLD_NOW: c_int = 2;

type Result<T> = std::result::Result<T, String>;

pub struct Driver {
    mem_alloc: unsafe extern "C" fn(*mut u64, usize) -> c_int,
    mem_free: unsafe extern "C" fn(u64) -> c_int,
    htod: unsafe extern "C" fn(u64, *const c_void, usize) -> c_int,
    dtoh: unsafe extern "C" fn(*mut c_void, u64, usize) -> c_int,
    synchronize: unsafe extern "C" fn() -> c_int,
}

fn check(result: c_int, call: &str) -> Result<()> {
    if result == 0 { Ok(()) } else { Err(format!("{call} returned CUresult {result}")) }
}

unsafe fn symbol<F: Copy>(library: *mut c_void, name: &CStr) -> Result<F> {
    let address = dlsym(library, name.as_ptr());
    if address.is_null() {
        return Err(format!("libcuda.so.1 lacks {}", name.to_string_lossy()));
    }
    // SAFETY (caller): F is the C signature of `name`.
    Ok(std::mem::transmute_copy(&address))
}

impl Driver {
    /// Opens the driver and makes `ordinal`'s primary context (the one kiln uses) current here.
    pub fn open(ordinal: i32) -> Result<Driver> {
        // SAFETY: each symbol is given its signature from cuda.h.
        unsafe {
            let library = dlopen(c"libcuda.so.1".as_ptr(), RTLD_NOW);
            if library.is_null() {
                return Err("cannot dlopen libcuda.so.1".into());
            }
            let init: unsafe extern "C" fn(u32) -> c_int = symbol(library, c"cuInit")?;
            let device_get: unsafe extern "C" fn(*mut c_int, c_int) -> c_int = symbol(library, c"cuDeviceGet")?;
            let retain: unsafe extern "C" fn(*mut *mut c_void, c_int) -> c_int =
                symbol(library, c"cuDevicePrimaryCtxRetain")?;
            let set_current: unsafe extern "C" fn(*mut c_void) -> c_int = symbol(library, c"cuCtxSetCurrent")?;
            check(init(0), "cuInit")?;
            let mut device = 0;
            check(device_get(&mut device, ordinal), "cuDeviceGet")?;
            let mut context = std::ptr::null_mut();
            check(retain(&mut context, device), "cuDevicePrimaryCtxRetain")?;
            check(set_current(context), "cuCtxSetCurrent")?;
            Ok(Driver {
                mem_alloc: symbol(library, c"cuMemAlloc_v2")?,
                mem_free: symbol(library, c"cuMemFree_v2")?,
                htod: symbol(library, c"cuMemcpyHtoD_v2")?,
                dtoh: symbol(library, c"cuMemcpyDtoH_v2")?,
                synchronize: symbol(library, c"cuCtxSynchronize")?,
            })
        }
    }

    pub fn alloc(&self, bytes: usize) -> Result<DeviceBuffer<'_>> {
        let mut pointer = 0;
        check(unsafe { (self.mem_alloc)(&mut pointer, bytes) }, "cuMemAlloc")?;
        Ok(DeviceBuffer { driver: self, pointer, bytes })
    }

    pub fn synchronize(&self) -> Result<()> {
        check(unsafe { (self.synchronize)() }, "cuCtxSynchronize")
    }
}

/// Device memory, freed on drop.
pub struct DeviceBuffer<'a> {
    driver: &'a Driver,
    pointer: u64,
    bytes: usize,
}

impl DeviceBuffer<'_> {
    pub fn as_ptr(&self) -> *mut c_void {
        self.pointer as *mut c_void
    }

    pub fn upload<T: Copy>(&self, host: &[T]) -> Result<()> {
        assert!(std::mem::size_of_val(host) <= self.bytes);
        check(unsafe { (self.driver.htod)(self.pointer, host.as_ptr().cast(), std::mem::size_of_val(host)) },
              "cuMemcpyHtoD")
    }

    pub fn download<T: Copy>(&self, host: &mut [T]) -> Result<()> {
        assert!(std::mem::size_of_val(host) <= self.bytes);
        check(unsafe { (self.driver.dtoh)(host.as_mut_ptr().cast(), self.pointer, std::mem::size_of_val(host)) },
              "cuMemcpyDtoH")
    }
}

impl Drop for DeviceBuffer<'_> {
    fn drop(&mut self) {
        unsafe { (self.driver.mem_free)(self.pointer) };
    }
}
