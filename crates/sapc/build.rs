//! Link options for the `sapc` binary.

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" {
        // Relative relocations packed (DT_RELR, glibc 2.36 and later): the dynamic
        // loader reads a few kilobytes instead of 1.1 MB of relocation entries at every
        // start, and `sapc run` of a cached program starts that much sooner.
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
