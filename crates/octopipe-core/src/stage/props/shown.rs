//! A default given as a constant (`#[prop(default = DEFAULT_LOOPS)]`): its value written as the
//! literal default would be, at compile time, so the property table (and `inspect`, and the
//! GStreamer plugin's `ParamSpec`s) keep a `&'static str` default.
//!
//! [`Shown`] wraps the constant; its `text` is written for each type a default constant has:
//! integers in decimal, an `f64` that is a whole number as an integer (`30.0`: `30`), a
//! `Duration` in seconds (`10s`: `10`, `1.5s`: `1.5`), a list of bytes comma-separated (`[11]`:
//! `11`). A value it cannot write exactly fails the build.

use std::time::Duration;

/// Longest text a default constant is written as.
const CAP: usize = 48;

/// A constant's value to write as a property's default text (`Shown(C).text()`).
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct Shown<T>(pub T);

/// A constant's value written out: the bytes of a `&'static str` once the table holds it.
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct ShownText {
    buf: [u8; CAP],
    len: usize,
}

impl ShownText {
    const EMPTY: ShownText = ShownText {
        buf: [0; CAP],
        len: 0,
    };

    /// The text.
    pub const fn as_str(&self) -> &str {
        let (text, _) = self.buf.split_at(self.len);
        match std::str::from_utf8(text) {
            Ok(s) => s,
            Err(_) => panic!("a default's text is ASCII"),
        }
    }

    const fn push(mut self, b: u8) -> Self {
        if self.len == CAP {
            panic!("a default constant's text is too long for the property table");
        }
        self.buf[self.len] = b;
        self.len += 1;
        self
    }

    /// `v` in decimal.
    const fn push_uint(mut self, v: u128) -> Self {
        let mut digits = [0u8; 40];
        let (mut n, mut v) = (0, v);
        loop {
            digits[n] = b'0' + (v % 10) as u8;
            n += 1;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        while n > 0 {
            n -= 1;
            self = self.push(digits[n]);
        }
        self
    }

    const fn push_int(self, v: i128) -> Self {
        if v < 0 {
            self.push(b'-').push_uint(v.unsigned_abs())
        } else {
            self.push_uint(v as u128)
        }
    }
}

/// The integer types: in decimal.
macro_rules! shown_int {
    ($($t:ty),*) => {$(
        impl Shown<$t> {
            /// The value in decimal.
            pub const fn text(self) -> ShownText {
                ShownText::EMPTY.push_int(self.0 as i128)
            }
        }
    )*};
}

shown_int!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize);

impl Shown<f64> {
    /// A whole number, as an integer (`30.0`: `30`); any other value fails the build.
    pub const fn text(self) -> ShownText {
        let v = self.0;
        // 2^53: every whole number below it is exact, and so is its integer.
        if v.is_nan() || v.abs() >= 9_007_199_254_740_992.0 || v as i64 as f64 != v {
            panic!("a default f64 constant is written only when it is a whole number: give the default as a literal");
        }
        ShownText::EMPTY.push_int(v as i64 as i128)
    }
}

impl Shown<Duration> {
    /// In seconds, the fraction without trailing zeros (`10s`: `10`, `1.5s`: `1.5`).
    pub const fn text(self) -> ShownText {
        let mut out = ShownText::EMPTY.push_uint(self.0.as_secs() as u128);
        let mut nanos = self.0.subsec_nanos();
        if nanos == 0 {
            return out;
        }
        out = out.push(b'.');
        let mut unit = 100_000_000;
        while nanos > 0 {
            out = out.push(b'0' + (nanos / unit) as u8);
            nanos %= unit;
            unit /= 10;
        }
        out
    }
}

impl Shown<&[u8]> {
    /// The values comma-separated (`[11]`: `11`, `[1, 2]`: `1,2`).
    pub const fn text(self) -> ShownText {
        let mut out = ShownText::EMPTY;
        let mut i = 0;
        while i < self.0.len() {
            if i > 0 {
                out = out.push(b',');
            }
            out = out.push_uint(self.0[i] as u128);
            i += 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_are_written_as_their_literals_would_be() {
        const LOOPS: ShownText = Shown(1u32).text();
        assert_eq!(LOOPS.as_str(), "1");
        assert_eq!(Shown(16 * 1024u32).text().as_str(), "16384");
        assert_eq!(Shown(-7i64).text().as_str(), "-7");
        assert_eq!(Shown(u64::MAX).text().as_str(), "18446744073709551615");
        assert_eq!(Shown(30.0f64).text().as_str(), "30");
        assert_eq!(Shown(Duration::from_secs(10)).text().as_str(), "10");
        assert_eq!(Shown(Duration::from_millis(1500)).text().as_str(), "1.5");
        assert_eq!(
            Shown(Duration::from_nanos(2_000_000_001)).text().as_str(),
            "2.000000001"
        );
        const CATEGORIES: &[u8] = &[11];
        assert_eq!(Shown(CATEGORIES).text().as_str(), "11");
        assert_eq!(Shown(&[1u8, 2][..]).text().as_str(), "1,2");
    }
}
