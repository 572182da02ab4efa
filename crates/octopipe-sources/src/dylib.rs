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
