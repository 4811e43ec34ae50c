//! Which loaded object (the program or a shared library) holds an address, from the dynamic
//! loader's list, read while the loader's lock keeps that list and its names in place.

/// The path of the loaded object whose segments hold `addr` (empty for the program itself, as
/// the loader names it) and the address it was loaded at; `None` when no loaded object holds it.
#[cfg(target_os = "linux")]
pub(crate) fn object_of(addr: usize) -> Option<(String, usize)> {
    let mut query = Query { addr, found: None };
    // SAFETY: `callback` has the signature `dl_iterate_phdr` expects and only uses `data` as the
    // `Query` passed here, which outlives the call.
    unsafe {
        libc::dl_iterate_phdr(
            Some(callback),
            (&mut query as *mut Query).cast::<libc::c_void>(),
        );
    }
    query.found
}

/// Off Linux the loader's list is not read: no object is named.
#[cfg(not(target_os = "linux"))]
pub(crate) fn object_of(_addr: usize) -> Option<(String, usize)> {
    None
}

/// What `dl_iterate_phdr`'s callback is asked and answers.
#[cfg(target_os = "linux")]
struct Query {
    addr: usize,
    found: Option<(String, usize)>,
}

/// A program header, as `dl_iterate_phdr` gives them on this target.
#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
pub(crate) type Phdr = libc::Elf64_Phdr;
/// A program header, as `dl_iterate_phdr` gives them on this target.
#[cfg(all(target_os = "linux", target_pointer_width = "32"))]
pub(crate) type Phdr = libc::Elf32_Phdr;

/// The program headers of the loaded object `info` describes.
///
/// # Safety
/// `info` must be one `dl_iterate_phdr` passed to its callback, read during that callback.
#[cfg(target_os = "linux")]
pub(crate) unsafe fn program_headers(info: &libc::dl_phdr_info) -> &[Phdr] {
    if info.dlpi_phdr.is_null() {
        return &[];
    }
    // SAFETY: such an `info` describes a loaded object whose `dlpi_phnum` program headers start
    // at `dlpi_phdr`, as `dl_iterate_phdr` guarantees for the callback's duration (the caller's
    // contract), which the returned slice's lifetime, that of `info`, does not outlast.
    unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) }
}

/// The addresses `[start, end)` that the segment of program header `p` occupies in an object
/// loaded at `base`.
#[cfg(target_os = "linux")]
pub(crate) fn segment(base: usize, p: &Phdr) -> (usize, usize) {
    let start = base.wrapping_add(p.p_vaddr as usize);
    (start, start.saturating_add(p.p_memsz as usize))
}

/// The addresses `[start, end)` of the loaded (`PT_LOAD`) segments among an object's program
/// headers `phdrs`, the object loaded at `base`.
#[cfg(target_os = "linux")]
pub(crate) fn load_segments(
    phdrs: &[Phdr],
    base: usize,
) -> impl Iterator<Item = (usize, usize)> + Clone + '_ {
    phdrs
        .iter()
        .filter(|p| p.p_type == libc::PT_LOAD)
        .map(move |p| segment(base, p))
}

/// `dl_iterate_phdr`'s callback: for the object whose loaded segments hold the address, copies
/// its path (while the loader's lock keeps it loaded) and stops the iteration (non-zero). The copy
/// allocates under the loader's lock, inside heapdelta's guard (symbols are resolved with it set),
/// so it captures no stack and never asks the loader again; a thread whose unwind-rule lookup
/// waits for that lock holds only `cfi`'s `LOOKUP`, which this thread's own lookups wait for a
/// bounded time (see `cfi.rs`).
#[cfg(target_os = "linux")]
unsafe extern "C" fn callback(
    info: *mut libc::dl_phdr_info,
    _size: libc::size_t,
    data: *mut libc::c_void,
) -> libc::c_int {
    // SAFETY: `data` is the `Query` `object_of` passed, and `info` is the loaded object's
    // description `dl_iterate_phdr` passes, valid for this callback.
    let (query, info) = unsafe { (&mut *data.cast::<Query>(), &*info) };
    let base = info.dlpi_addr as usize;
    // SAFETY: `info` is what `dl_iterate_phdr` passed to this callback, read during it.
    let holds = load_segments(unsafe { program_headers(info) }, base)
        .any(|(start, end)| (start..end).contains(&query.addr));
    if !holds {
        return 0;
    }
    let path = if info.dlpi_name.is_null() {
        String::new()
    } else {
        // SAFETY: a non-null `dlpi_name` is the object's NUL-terminated path, which the loader
        // keeps while the object is loaded: at least for this callback, under the loader's lock.
        unsafe { std::ffi::CStr::from_ptr(info.dlpi_name) }
            .to_string_lossy()
            .into_owned()
    };
    query.found = Some((path, base));
    1
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn the_program_is_the_object_without_a_path() {
        let here = the_program_is_the_object_without_a_path as *const () as usize;
        assert_eq!(object_of(here).map(|(path, _)| path), Some(String::new()));
    }

    #[test]
    fn libc_is_found_by_an_address_in_it() {
        let getpid = libc::getpid as *const () as usize;
        let (path, base) = object_of(getpid).expect("libc is loaded");
        assert!(path.contains("libc"), "{path}");
        assert!(base <= getpid);
    }

    #[test]
    fn an_address_in_no_object_is_none() {
        assert_eq!(object_of(16), None);
    }
}
