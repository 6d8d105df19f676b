//! Paths of the guest programs compiled for Warden's tests and benchmarks.
//!
//! Each constant is the absolute path of one module built from
//! `guests/<name>.wat` or `guests/<name>.c` by this crate's build script.

include!(concat!(env!("OUT_DIR"), "/guests.rs"));

/// The path of a guest that may be unbuilt (a Java one without a JDK):
/// panics with the reason it could not be built.
pub fn built(path: &'static str) -> &'static str {
    if path.is_empty() {
        panic!("a guest this test needs was not built: {UNBUILT:?} (run scripts/toolchains)");
    }
    path
}
