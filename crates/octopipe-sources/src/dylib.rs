//! Functions of a C library opened at run time (`libloading`), copied out of their symbols: how
//! the tables of nvJPEG's functions (`nvjpeg::ffi`) and `libgstcuda-1.0`'s (`nvdec`) are
//! filled, so that builds and machines without the library keep working.

use libloading::Library;

/// Function `name` of `library`, copied out of its symbol; `missing(name, why)` when the library
/// has none.
///
/// # Safety
/// `T` must be the function's type as the library declares it; the pointer stays valid while
/// `library` is loaded.
pub(crate) unsafe fn symbol<T: Copy, E>(
    library: &Library,
    name: &'static str,
    missing: impl FnOnce(&'static str, libloading::Error) -> E,
) -> Result<T, E> {
    // SAFETY: forwarded to the caller.
    let found = unsafe { library.get::<T>(name.as_bytes()) };
    found.map(|s| *s).map_err(|e| missing(name, e))
}

/// Function `name` of `library` when it has one (a function of later versions only).
///
/// # Safety
/// As for [`symbol`].
pub(crate) unsafe fn optional<T: Copy>(library: &Library, name: &str) -> Option<T> {
    // SAFETY: forwarded to the caller.
    let found = unsafe { library.get::<T>(name.as_bytes()) };
    found.ok().map(|s| *s)
}

#[cfg(test)]
mod tests {
    use std::ffi::c_char;

    use super::*;

    #[test]
    fn a_function_is_copied_out_and_a_missing_one_is_named() {
        // SAFETY: the C library is loaded in every process already.
        let library = unsafe { Library::new("libc.so.6") }.unwrap();
        // SAFETY: `strlen`'s type in string.h; `library` outlives the calls.
        let strlen: unsafe extern "C" fn(*const c_char) -> usize =
            unsafe { symbol(&library, "strlen", |name, _| name) }.unwrap();
        // SAFETY: a NUL-terminated string.
        assert_eq!(unsafe { strlen(c"octopipe".as_ptr()) }, 8);
        // SAFETY: never called.
        let missing = unsafe {
            symbol::<unsafe extern "C" fn(), _>(&library, "octopipe_no_such_function", |name, _| {
                name
            })
        };
        assert_eq!(missing.err(), Some("octopipe_no_such_function"));
        // SAFETY: never called.
        let optional_missing =
            unsafe { optional::<unsafe extern "C" fn()>(&library, "octopipe_no_such_function") };
        assert!(optional_missing.is_none());
        // SAFETY: `abort`'s type in stdlib.h; never called.
        let abort = unsafe { optional::<unsafe extern "C" fn()>(&library, "abort") };
        assert!(abort.is_some());
    }
}
