//! `handle!(Name, STATIC)`: a zero-sized allocator forwarding every call to a tracker static.
//!
//! A program reaches its global allocator through `__rust_alloc`, which calls a function made for
//! that one static, so the static's settings are constants there. Calling each tracker through a
//! handle of its own compiles the churn code once per tracker, as in a program that installs it
//! (one shared instance would read the settings at run time instead).

macro_rules! handle {
    ($handle:ident, $static:ident) => {
        struct $handle;
        // SAFETY: forwards every call to the static unchanged.
        unsafe impl std::alloc::GlobalAlloc for $handle {
            #[inline(always)]
            unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
                // SAFETY: the caller's contract, passed on.
                unsafe { std::alloc::GlobalAlloc::alloc(&$static, layout) }
            }
            #[inline(always)]
            unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
                // SAFETY: the caller's contract, passed on.
                unsafe { std::alloc::GlobalAlloc::dealloc(&$static, ptr, layout) }
            }
        }
    };
}
