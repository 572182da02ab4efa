//! A stage's properties as written, checked against its declaration, read by type.

use crate::description::{closest, DescribeError, Description, StageDesc};
use crate::stage::StageDecl;

use super::parse::{parse_bool, parse_floats3, parse_size};
use super::spec::{PropSpec, PropType};
use super::value::PropValue;

/// One stage's properties as written, checked against its declaration; values by type.
pub struct Props<'a> {
    desc: &'a Description,
    stage: &'a StageDesc,
    decl: &'a StageDecl,
}

impl<'a> Props<'a> {
    /// The properties of `stage` (of kind `decl`) in `desc`.
    pub fn new(desc: &'a Description, stage: &'a StageDesc, decl: &'a StageDecl) -> Self {
        Props { desc, stage, decl }
    }

    /// The stage's declaration.
    pub fn decl(&self) -> &StageDecl {
        self.decl
    }

    /// Refuse unknown properties (suggesting the closest name) and values not of their type.
    pub fn check(&self) -> Result<(), DescribeError> {
        for p in &self.stage.props {
            if p.key == "name" {
                continue;
            }
            let Some(spec) = self.spec(&p.key) else {
                let names = self
                    .decl
                    .props
                    .iter()
                    .filter(|s| !matches!(s.ty, PropType::Renamed { .. }))
                    .map(|s| s.name);
                let hint = closest(&p.key, names.clone())
                    .map(|c| format!(" (did you mean '{c}'?)"))
                    .unwrap_or_else(|| {
                        format!(" (properties: {})", names.collect::<Vec<_>>().join(", "))
                    });
                return Err(self.desc.error(
                    p.key_span,
                    format!(
                        "stage '{}' has no property '{}'{hint}",
                        self.decl.name, p.key
                    ),
                ));
            };
            if let PropType::Renamed { to } = spec.ty {
                let now = self
                    .spec(to)
                    .map_or(String::new(), |s| format!(" ({})", s.doc));
                return Err(self.desc.error(
                    p.key_span,
                    format!(
                        "{}: {} is now called {to}{now}: write {to}={}",
                        self.decl.name, p.key, p.value
                    ),
                ));
            }
            if !spec.ty.accepts(&p.value) {
                return Err(self.desc.error(
                    p.value_span,
                    format!(
                        "{}: {} must be {}, found '{}'",
                        self.decl.name,
                        p.key,
                        spec.ty.expected(),
                        p.value
                    ),
                ));
            }
        }
        Ok(())
    }

    fn spec(&self, key: &str) -> Option<&PropSpec> {
        self.decl.props.iter().find(|s| s.name == key)
    }

    /// `v`, the value of `key` as written, read as a `T`; an error naming the stage, the
    /// property and what it must be where it is not one (after [`Props::check`], only where the
    /// declared type takes more than `T` does).
    pub fn parse<T: PropValue>(&self, key: &str, v: &str) -> Result<T, DescribeError> {
        T::parse_prop(v).ok_or_else(|| {
            let expected = self
                .spec(key)
                .map_or_else(|| T::TYPE.expected(), |s| s.ty.expected());
            self.error(
                key,
                format!("{}: {key} must be {expected}, found '{v}'", self.decl.name),
            )
        })
    }

    /// The value as written, if given.
    pub fn given(&self, key: &str) -> Option<&'a str> {
        self.stage
            .props
            .iter()
            .find(|p| p.key == key)
            .map(|p| p.value.as_str())
    }

    /// The value as written, or the declared default when that is a value of the type.
    fn value(&self, key: &str) -> Option<&'a str> {
        debug_assert!(
            key == "name" || self.spec(key).is_some(),
            "{}: undeclared property {key}",
            self.decl.name
        );
        self.given(key).or_else(|| {
            self.decl
                .props
                .iter()
                .find(|s| s.name == key)
                .filter(|s| s.ty.accepts(s.default) && !matches!(s.default, "-" | "auto"))
                .map(|s| s.default)
        })
    }

    /// A text value (or its default).
    pub fn str(&self, key: &str) -> Option<&'a str> {
        self.value(key)
    }

    /// A required text value: an error naming the stage when missing or empty.
    pub fn required(&self, key: &str) -> Result<&'a str, DescribeError> {
        match self.stage.props.iter().find(|p| p.key == key) {
            Some(p) if !p.value.is_empty() => Ok(&p.value),
            Some(p) => Err(self
                .desc
                .error(p.value_span, format!("{}: {key} is empty", self.decl.name))),
            None => Err(self.desc.error(
                self.stage.span,
                format!("stage '{}' needs {key}=...", self.decl.name),
            )),
        }
    }

    /// An integer value (checked against its range).
    pub fn int(&self, key: &str) -> Option<i64> {
        self.value(key).and_then(|v| v.parse().ok())
    }

    /// A non-negative integer value as `usize`.
    pub fn usize(&self, key: &str) -> Option<usize> {
        self.int(key).and_then(|v| usize::try_from(v).ok())
    }

    /// A number.
    pub fn float(&self, key: &str) -> Option<f64> {
        self.value(key).and_then(|v| v.parse().ok())
    }

    /// A boolean.
    pub fn bool(&self, key: &str) -> Option<bool> {
        self.value(key).and_then(parse_bool)
    }

    /// `WIDTHxHEIGHT`.
    pub fn size(&self, key: &str) -> Option<(u32, u32)> {
        self.value(key).and_then(parse_size)
    }

    /// Three numbers.
    pub fn floats3(&self, key: &str) -> Option<[f32; 3]> {
        self.value(key).and_then(parse_floats3)
    }

    /// Comma-separated words, trimmed.
    pub fn list(&self, key: &str) -> Option<Vec<String>> {
        self.value(key)
            .map(|v| v.split(',').map(|s| s.trim().to_string()).collect())
    }

    /// Comma-separated integers.
    pub fn ints(&self, key: &str) -> Option<Vec<i64>> {
        self.value(key).map(|v| {
            v.split(',')
                .filter(|s| !s.trim().is_empty())
                .filter_map(|s| s.trim().parse().ok())
                .collect()
        })
    }

    /// An error about the characters `chars` (0-based) of `key`'s value, the caret under them
    /// where the value is written as it is (plain or in quotes), else under the whole value.
    pub fn error_in(
        &self,
        key: &str,
        chars: std::ops::Range<usize>,
        message: impl Into<String>,
    ) -> DescribeError {
        let Some(p) = self.stage.props.iter().find(|p| p.key == key) else {
            return self.error(key, message);
        };
        let span = p.value_span;
        let raw = self
            .desc
            .text
            .get(span.start..span.start + span.len)
            .unwrap_or("");
        let quoted = raw.len() >= 2 && raw.starts_with(['"', '\'']) && raw.ends_with(&raw[..1]);
        let inner = if quoted { &raw[1..raw.len() - 1] } else { raw };
        let byte = |c: usize| inner.char_indices().nth(c).map_or(inner.len(), |(i, _)| i);
        if inner != p.value {
            return self.desc.error(span, message);
        }
        let start = span.start + usize::from(quoted) + byte(chars.start);
        let len = (byte(chars.end) + usize::from(quoted) + span.start).saturating_sub(start);
        self.desc.error(
            crate::description::Span {
                start,
                len: len.max(1),
            },
            message,
        )
    }

    /// An error about `key`'s value (or the stage, when `key` is not given).
    pub fn error(&self, key: &str, message: impl Into<String>) -> DescribeError {
        let span = self
            .stage
            .props
            .iter()
            .find(|p| p.key == key)
            .map_or(self.stage.span, |p| p.value_span);
        self.desc.error(span, message)
    }
}
