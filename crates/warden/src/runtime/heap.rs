//! When a runtime hands freed heap back to the system: after a mass
//! death of tasks, so a run's RSS follows its live tasks down.

/// Whether so many tasks have died since the peak (at least 1,024, and
/// half of those alive then) that their freed heap should go back to the
/// system; if so, the peak restarts from `live`.
pub(super) fn mass_death(peak_live: &mut usize, live: usize) -> bool {
    let died = *peak_live - live.min(*peak_live);
    if died >= 1024 && live <= *peak_live / 2 {
        *peak_live = live;
        return true;
    }
    false
}

/// Returns free heap pages to the system (glibc keeps them otherwise, and
/// a run's RSS would stay at its highest point for ever), and asks every
/// worker to do the same with the program's allocator (see `crate::trim`).
pub(super) fn return_free_heap(trim: &crate::trim::HeapTrim) {
    trim.ask_all();
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases memory malloc holds unused.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
#[test]
fn trimmed_after_mass_deaths_only_after_mass_deaths_only() {
    let mut peak = 3000;
    assert!(!mass_death(&mut peak, 2000), "a third died");
    assert!(mass_death(&mut peak, 1400), "more than half, over 1,024");
    assert_eq!(peak, 1400);
    assert!(!mass_death(&mut peak, 500), "under 1,024 died since");
    let mut small = 1500;
    assert!(!mass_death(&mut small, 700), "800 is not a mass");
}
