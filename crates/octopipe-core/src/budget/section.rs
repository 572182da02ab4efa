//! Typed sections of the report: what a stage says about its own work at the end of a run
//! (the detector's time split, each stream's tracks, the tile filter's savings, a broker's
//! deliveries), as one text line for people and as typed fields for machines.
//!
//! A stage declares its section as a plain struct that is [`serde::Serialize`],
//! [`serde::Deserialize`] and [`std::fmt::Display`] (its line in the text report) and names its
//! kind once ([`SectionKind::KIND`]); it adds it with [`Budget::add_section`](super::Budget::add_section).
//! The JSON report (`octopipe run --report json`, schema [`REPORT_VERSION`]) holds every section
//! under `sections.KIND`, a list in the order they were added; an application reads them back
//! typed with [`Report::sections`](super::Report::sections). docs/report.md lists the fields of
//! each built-in kind.

use serde::de::DeserializeOwned;
use serde::Serialize;

/// The version of the JSON report's schema (docs/report.md). 1: the report before typed
/// sections (stage results as free text under `extra`); 2: typed `sections`, `live`,
/// `classifier`; 3: each stage's time apart (`queued`, `work`, `busy_ms`, `busy_percent`), each
/// live stream's `behind_schedule`, the run's `error`, the outputs `not_written`, and
/// `headroom_ms` `null` when no frame was processed.
pub const REPORT_VERSION: u32 = 3;

/// A kind of report section: its fields (serialized), its text line (`Display`) and its name.
pub trait SectionKind: Serialize + DeserializeOwned + std::fmt::Display {
    /// The key it is listed under in the JSON report's `sections` (`detect`, `track`, `tiles`,
    /// `brokers`, ...).
    const KIND: &'static str;
}

/// One section as the report keeps it: its kind, its text and its fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Section {
    /// Its kind ([`SectionKind::KIND`]).
    pub kind: &'static str,
    /// Its line(s) in the text report.
    pub text: String,
    /// Its fields, as the JSON report gives them.
    pub fields: serde_json::Value,
}

impl Section {
    /// The section of `value`.
    pub fn of<T: SectionKind>(value: &T) -> Section {
        Section {
            kind: T::KIND,
            text: value.to_string(),
            // A section is a struct of plain fields: serializing it cannot fail; should it,
            // the error stands in the fields rather than losing the section.
            fields: serde_json::to_value(value)
                .unwrap_or_else(|e| serde_json::json!({ "error": e.to_string() })),
        }
    }

    /// The fields as a `T`, when this section is of `T`'s kind.
    pub fn get<T: SectionKind>(&self) -> Option<T> {
        (self.kind == T::KIND)
            .then(|| serde_json::from_value(self.fields.clone()).ok())
            .flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Count {
        frames: u64,
    }

    impl std::fmt::Display for Count {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "count: {} frames", self.frames)
        }
    }

    impl SectionKind for Count {
        const KIND: &'static str = "count";
    }

    #[test]
    fn a_section_keeps_its_text_and_typed_fields() {
        let s = Section::of(&Count { frames: 24 });
        assert_eq!(
            (s.kind, s.text.as_str(), &s.fields),
            (
                "count",
                "count: 24 frames",
                &serde_json::json!({ "frames": 24 })
            )
        );
        assert_eq!(s.get::<Count>(), Some(Count { frames: 24 }));
    }
}
