// Links libkiln from the folder the Meson build names in KILN_LIB_DIR.
fn main() {
    println!("cargo:rerun-if-env-changed=KILN_LIB_DIR");
    let dir = std::env::var("KILN_LIB_DIR").expect("KILN_LIB_DIR must name the folder holding libkiln.so");
    println!("cargo:rustc-link-search=native={dir}");
    println!("cargo:rustc-link-lib=dylib=kiln");
}
