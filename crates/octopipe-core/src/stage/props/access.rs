//! A stage kind's declaration ([`StageDecl`]: its name, role, properties and constructor), and
//! a stage's properties as written, checked against it, read by type.

use std::fmt;

use crate::description::{closest, shown_word, DescribeError, Description, StageDesc};
use crate::stage::element::Element;
use crate::stage::role::Role;

use super::parse::{parse_bool, parse_floats3, parse_size};
use super::spec::{in_float_bounds, PropSpec, PropType, MAX_FLOAT, MIN_FLOAT};
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
                        "{}: {} must be {}{}, found '{}'",
                        self.decl.name,
                        p.key,
                        spec.ty.expected(),
                        float_bounds_note(spec.ty, &p.value),
                        shown_word(&p.value)
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

/// A stage kind's declaration: everything parsing, validation, `inspect` and the runner need.
#[derive(Clone, Copy)]
pub struct StageDecl {
    /// Name as written in descriptions.
    pub name: &'static str,
    /// Its role.
    pub role: Role,
    /// What it does, in one line.
    pub doc: &'static str,
    /// Its properties (besides `name`, which every stage has).
    pub props: &'static [PropSpec],
    /// Roles that must come before it on its way from the source. A missing batch or preprocess
    /// stage is put in with its defaults; another missing role is an error naming this stage.
    pub needs: &'static [Role],
    /// Roles it does the job of (an application source whose frames bring their own boxes
    /// provides [`Role::Boxes`]).
    pub provides: &'static [Role],
    /// Make the stage's settings from its checked properties. No GStreamer, CUDA or ONNX Runtime
    /// work here: that happens in [`Element::open`].
    pub make: fn(&Props) -> Result<Box<dyn Element>, crate::description::DescribeError>,
}

impl fmt::Debug for StageDecl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StageDecl")
            .field("name", &self.name)
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

impl StageDecl {
    /// The stage's settings from `props` (`key`, `value`, as a description writes them; the
    /// others take their declared defaults), checked as the description builder checks them:
    /// for opening a stage outside a pipeline (a GStreamer element wrapper, a Python object,
    /// a test) with an [`OpenContext::new`](crate::stage::OpenContext::new).
    ///
    /// ```
    /// # use octopipe_core::stage::*;
    /// # use octopipe_core::frame::Frame;
    /// # use octopipe_core::Error;
    /// # #[derive(Debug)]
    /// # struct Pass;
    /// # impl Stage<Frame, Frame> for Pass {
    /// #     fn process(&mut self, f: Frame, out: &mut Vec<Frame>) -> Result<(), Error> {
    /// #         out.push(f);
    /// #         Ok(())
    /// #     }
    /// # }
    /// # impl Element for Pass {
    /// #     fn open(self: Box<Self>, _: &mut OpenContext) -> Result<Running, Error> {
    /// #         Ok(Running::stage(self))
    /// #     }
    /// # }
    /// # const PASS: StageDecl = StageDecl {
    /// #     name: "pass", role: Role::Filter(Item::FRAMES), doc: "", props: &[],
    /// #     needs: &[], provides: &[], make: |_| Ok(Box::new(Pass)),
    /// # };
    /// let mut caps = Caps::default();
    /// let mut ctx = OpenContext::new(&mut caps);
    /// let running = PASS.element(&[])?.open(&mut ctx)?;
    /// let mut stage = running.into_stage::<Frame, Frame>().ok().unwrap();
    /// let mut out = Vec::new();
    /// stage.finish(&mut out)?;
    /// assert!(PASS.element(&[("every", "3")]).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn element(
        &self,
        props: &[(&str, &str)],
    ) -> Result<Box<dyn Element>, crate::description::DescribeError> {
        let desc = crate::description::Description::single("<element>", self.name, props);
        let props = Props::new(&desc, &desc.stages[0], self);
        props.check()?;
        (self.make)(&props)
    }
}

/// Why a number in a property's own range was refused all the same: it is not finite, or past
/// the sizes any property takes ([`MAX_FLOAT`], [`MIN_FLOAT`]); empty otherwise.
fn float_bounds_note(ty: PropType, value: &str) -> String {
    let numbers: Vec<Option<f64>> = match ty {
        PropType::Float { .. } => vec![value.trim().parse().ok()],
        PropType::Floats3 { .. } => value.split(',').map(|v| v.trim().parse().ok()).collect(),
        _ => return String::new(),
    };
    match numbers.iter().flatten().any(|x| !in_float_bounds(*x)) {
        true => format!(" (a finite number, 0 or from {MIN_FLOAT:e} to {MAX_FLOAT:e} in size)"),
        false => String::new(),
    }
}
