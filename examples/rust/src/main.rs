//! kiln from Rust through the C ABI: create a service, print the device and a pick, and (with a
//! GPU) quantize a bf16 buffer and check one group.
//!
//!   kiln-example [--cpu-only | --gpu]
//!   default: the CPU part, then the GPU part when there is a GPU (exit 0 either way);
//!   --cpu-only: the CPU part only; --gpu: exit 77 (skipped) without a GPU.

mod cuda;
mod kiln;

use std::process::ExitCode;

fn expect(ok: bool, what: &str) -> Result<(), String> {
    println!("{}: {what}", if ok { "ok" } else { "FAIL" });
    if ok { Ok(()) } else { Err(what.to_string()) }
}

fn cpu_part(service: &kiln::Service) -> Result<kiln::DeviceInfo, String> {
    let (major, minor, patch, abi) = kiln::version().map_err(|e| e.to_string())?;
    println!("kiln {major}.{minor}.{patch}, C ABI {abi}");
    expect(abi == kiln::ABI_VERSION, "the library's ABI is the one this crate declares")?;

    let info = service.device_info().map_err(|e| e.to_string())?;
    println!("device {}: {}, cc {}.{}, {} SMs, target '{}', available {}{}", info.ordinal, info.name, info.cc.0,
             info.cc.1, info.sm_count, info.target, info.available,
             if info.available { String::new() } else { format!(": {}", info.reason) });

    let pick = service.pick(4096, 7168).map_err(|e| e.to_string())?;
    println!("pick m=4096 k=7168 here: {pick}");
    let expected_x = if pick.twin { 4096 * 56 / 16 } else { 4096 };
    expect(pick.grid[0] == expected_x, "the pick's grid is its kernel's (twin: 16 groups a CTA)")?;
    let plan = kiln::plan(16, 5120, 132, true, kiln::LEVER_ON).map_err(|e| e.to_string())?;
    println!("plan m=16 k=5120 on 132 SMs: {plan}");
    expect(plan.twin && plan.grid[0] == 40, "the twin fills an H200 at m=16, k=5120")?;
    let fewer = kiln::plan(15, 5120, 132, true, kiln::LEVER_ON).map_err(|e| e.to_string())?;
    expect(fewer.reject == kiln::REJECT_TOO_FEW_CTAS, "one row fewer is too few CTAs for the twin")?;

    match service.pick(1, 100) {
        Err(error) => {
            expect(error.status == 1, "k=100 is refused")?;
            println!("    ({error})");
        }
        Ok(_) => expect(false, "k=100 is refused")?,
    }
    Ok(info)
}

fn bf16_to_f32(bits: u16) -> f32 {
    f32::from_bits((bits as u32) << 16)
}

fn e4m3_to_f32(code: u8) -> f32 {
    let (exponent, mantissa) = (((code >> 3) & 0xF) as i32, (code & 7) as f32);
    let magnitude = if exponent == 0 { mantissa * 2f32.powi(-9) } else { (1.0 + mantissa / 8.0) * 2f32.powi(exponent - 7) };
    if code & 0x80 != 0 { -magnitude } else { magnitude }
}

/// Half an e4m3 step at |v| (<= 448): the most round-to-nearest may move a value.
fn e4m3_half_step(v: f32) -> f32 {
    let binade = v.abs().log2().floor() as i32;
    if binade < -6 { 2f32.powi(-10) } else { 2f32.powi(binade - 4) }
}

fn gpu_part(service: &kiln::Service, info: &kiln::DeviceInfo) -> Result<(), String> {
    const M: u32 = 64;
    const K: u32 = 5120;
    let (n, groups) = ((M * K) as usize, (K / 128) as usize);
    let driver = cuda::Driver::open(info.ordinal)?;
    // bf16 of magnitude in [1, 16), random sign: an LCG's bits (as the C example).
    let mut state: u32 = 12345;
    let x: Vec<u16> = (0..n)
        .map(|_| {
            state = state.wrapping_mul(1664525).wrapping_add(1013904223);
            (0x3F80 + ((state >> 16) & 0x01FF) as u16) | (((state >> 31) as u16) << 15)
        })
        .collect();
    let (dx, dq, ds) = (driver.alloc(n * 2)?, driver.alloc(n)?, driver.alloc(M as usize * groups * 4)?);
    dx.upload(&x)?;
    // SAFETY: three device buffers of the shape's sizes, alive until after the synchronize below.
    let pick = unsafe { service.quantize(dx.as_ptr(), dq.as_ptr(), ds.as_ptr().cast(), M, K, std::ptr::null_mut()) }
        .map_err(|e| e.to_string())?;
    println!("launched m={M} k={K}: {pick}");
    driver.synchronize()?;
    let mut q = vec![0u8; n];
    let mut scales = vec![0f32; M as usize * groups];
    dq.download(&mut q)?;
    ds.download(&mut scales)?;

    // One group: the scale is absmax/448 exactly; each q, decoded, is x/scale to within half a step.
    let (row, group) = (5usize, 17usize);
    let base = row * K as usize + group * 128;
    let absmax = x[base..base + 128].iter().map(|&b| bf16_to_f32(b).abs()).fold(0f32, f32::max);
    let scale = absmax.max(1e-10) / 448.0;
    expect(scales[row * groups + group].to_bits() == scale.to_bits(), "group (5, 17): scale == absmax / 448")?;
    let worst = (0..128)
        .map(|i| {
            let v = bf16_to_f32(x[base + i]) / scale;
            (e4m3_to_f32(q[base + i]) - v).abs() / e4m3_half_step(v)
        })
        .fold(0f32, f32::max);
    expect(worst <= 1.0, "group (5, 17): every q is x/scale rounded to e4m3")
}

fn main() -> ExitCode {
    let mode = std::env::args().nth(1).unwrap_or_default();
    let run = || -> Result<u8, String> {
        let service = kiln::Service::new(0).map_err(|e| e.to_string())?;
        let info = cpu_part(&service)?;
        if mode == "--cpu-only" {
            return Ok(0);
        }
        if !info.available {
            println!("GPU part: skipped, no usable GPU");
            return Ok(if mode == "--gpu" { 77 } else { 0 });
        }
        gpu_part(&service, &info)?;
        println!("GPU part: passed");
        Ok(0)
    };
    match run() {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            eprintln!("FAIL: {error}");
            ExitCode::FAILURE
        }
    }
}
