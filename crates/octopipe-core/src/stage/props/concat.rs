//! The derive's property table, built at compile time from its pieces.

use super::spec::{PropSpec, PropType};

/// How many properties `pieces` hold together (the derive's table).
#[doc(hidden)]
pub const fn props_len(pieces: &[&[PropSpec]]) -> usize {
    let (mut n, mut i) = (0, 0);
    while i < pieces.len() {
        n += pieces[i].len();
        i += 1;
    }
    n
}

/// `pieces` one after the other (the derive's table, a flattened block in its place); a name
/// twice fails the build.
#[doc(hidden)]
pub const fn props_concat<const N: usize>(pieces: &[&[PropSpec]]) -> [PropSpec; N] {
    let mut out = [PropSpec::new("", PropType::Bool, "", ""); N];
    let (mut k, mut i) = (0, 0);
    while i < pieces.len() {
        let mut j = 0;
        while j < pieces[i].len() {
            let mut seen = 0;
            while seen < k {
                if str_eq(out[seen].name, pieces[i][j].name) {
                    panic!("a property is declared twice");
                }
                seen += 1;
            }
            out[k] = pieces[i][j];
            k += 1;
            j += 1;
        }
        i += 1;
    }
    assert!(k == N, "props_concat: N is not props_len");
    out
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}
