//! Scoring a classifier's labels against the annotated VisDrone categories (`octopipe eval
//! labels`): the objects a `jsonl` sink wrote from annotation boxes (each with its
//! `annotation.category_id`) through a classifier (its `label`).
//!
//! ```text
//! octopipe eval labels --objects objects.jsonl
//! ```
//!
//! A label stands for a set of categories ([`LabelMap`]; by default the shared classifier's:
//! `person` 1, 2; `two-wheeler` 3, 7, 8, 10; `car` 4; `large-vehicle` 5, 6, 9). An object is
//! labelled as annotated when its category is among its label's. Objects with no label (no
//! classifier, non-finite logits) or with a category no label stands for (0 ignored regions,
//! 11 others) are counted apart. Objects with no annotated category (a detector's boxes, whose
//! `detection` class is no annotation) are refused, and so are lines of the objects schema
//! version 1 (a `category` at the top level, which meant either).

use std::fmt;
use std::path::Path;

use serde::Deserialize;

use super::EvalError;
use octopipe_core::files::FileError;

/// Which VisDrone categories each label stands for, in table order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelMap(Vec<(String, Vec<u32>)>);

impl LabelMap {
    /// The shared classifier `visdrone-crops-64.onnx`'s classes.
    pub(crate) fn visdrone_crops() -> Self {
        let map = [
            ("person", vec![1, 2]),
            ("two-wheeler", vec![3, 7, 8, 10]),
            ("car", vec![4]),
            ("large-vehicle", vec![5, 6, 9]),
        ];
        LabelMap(map.into_iter().map(|(l, c)| (l.to_string(), c)).collect())
    }

    /// A map written `LABEL=CAT+CAT,LABEL=CAT,...`.
    pub fn parse(text: &str) -> Result<Self, EvalError> {
        let bad = |reason: String| EvalError::ClassMap {
            text: text.to_string(),
            reason,
        };
        let mut map = Vec::new();
        for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (label, cats) = pair
                .split_once('=')
                .ok_or_else(|| bad(format!("'{pair}' is not LABEL=CATEGORY+CATEGORY...")))?;
            let cats = cats
                .split('+')
                .map(|c| {
                    c.trim()
                        .parse::<u32>()
                        .map_err(|_| bad(format!("'{}' is not a category number", c.trim())))
                })
                .collect::<Result<Vec<u32>, _>>()?;
            map.push((label.trim().to_string(), cats));
        }
        if map.is_empty() {
            return Err(bad("no LABEL=CATEGORY pairs".into()));
        }
        Ok(LabelMap(map))
    }

    /// Whether `label` is one of the map's.
    fn names(&self, label: &str) -> bool {
        self.0.iter().any(|(l, _)| l == label)
    }

    /// The map's labels, comma-separated.
    fn labels(&self) -> String {
        let labels: Vec<&str> = self.0.iter().map(|(l, _)| l.as_str()).collect();
        labels.join(", ")
    }

    /// The label that stands for `category`, if any.
    fn label_of(&self, category: u32) -> Option<usize> {
        self.0.iter().position(|(_, cats)| cats.contains(&category))
    }
}

/// One label's row: objects annotated as its categories, and how many got it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct LabelRow {
    /// The label.
    pub label: String,
    /// Objects whose category it stands for (and that have a label).
    pub annotated: u64,
    /// Of those, the ones labelled with it.
    pub right: u64,
}

/// The labels of a run scored.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct LabelsEvaluation {
    /// Per label, in the map's order.
    pub rows: Vec<LabelRow>,
    /// Objects with no label (not scored).
    pub unlabelled: u64,
    /// Objects with no category, or one no label stands for (not scored).
    pub uncounted: u64,
}

impl LabelsEvaluation {
    /// Objects scored, and of them those labelled as annotated.
    pub fn total(&self) -> (u64, u64) {
        let n = self.rows.iter().map(|r| r.annotated).sum();
        (n, self.rows.iter().map(|r| r.right).sum())
    }
}

impl fmt::Display for LabelsEvaluation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let share = |a: u64, b: u64| match b {
            0 => "-".to_string(),
            b => format!("{:.1}%", 100.0 * a as f64 / b as f64),
        };
        writeln!(
            f,
            "{:<16} {:>9} {:>7} {:>7}",
            "class", "annotated", "right", "share"
        )?;
        for r in &self.rows {
            let s = share(r.right, r.annotated);
            writeln!(
                f,
                "{:<16} {:>9} {:>7} {s:>7}",
                r.label, r.annotated, r.right
            )?;
        }
        let (n, right) = self.total();
        writeln!(f, "{:<16} {n:>9} {right:>7} {:>7}", "all", share(right, n))?;
        write!(
            f,
            "labelled as annotated: {right} of {n} ({}); not scored: {} objects with no label, {} with no category a label stands for",
            share(right, n),
            self.unlabelled,
            self.uncounted
        )
    }
}

/// The fields of a JSONL object read here.
#[derive(Deserialize)]
struct Line {
    label: Option<String>,
    annotation: Option<Annotation>,
    detection: Option<serde::de::IgnoredAny>,
    /// Version 1's class of either kind (no longer written).
    category: Option<serde::de::IgnoredAny>,
}

/// The annotated category of an object.
#[derive(Deserialize)]
struct Annotation {
    category_id: u32,
}

/// Objects with no annotated category: how many, of which kind, and where the first is.
#[derive(Default)]
struct NoCategory {
    detected: u64,
    unnamed: u64,
    first: usize,
}

impl NoCategory {
    /// What was found, for the error: `all` is every object read.
    fn found(&self, all: u64) -> String {
        let missing = self.detected + self.unnamed;
        if missing == all && self.unnamed == 0 {
            return format!("{missing} objects carry a detector class, none an annotated category");
        }
        format!(
            "{missing} of {all} objects carry no annotated category ({} a detector class, {} no class; the first at line {})",
            self.detected, self.unnamed, self.first
        )
    }
}

/// Score the objects of JSONL text (`path` names it in errors) with `map`.
pub fn evaluate(text: &str, path: &str, map: &LabelMap) -> Result<LabelsEvaluation, EvalError> {
    let mut e = LabelsEvaluation {
        rows: map
            .0
            .iter()
            .map(|(label, _)| LabelRow {
                label: label.clone(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    let (mut all, mut none) = (0, NoCategory::default());
    // Labels the map does not name, by name: each would be scored wrong.
    let mut unknown: std::collections::BTreeMap<String, u64> = Default::default();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let parse = |reason: String| EvalError::from(FileError::parse(path, i + 1, reason));
        let o: Line = serde_json::from_str(line)
            .map_err(|err| parse(format!("not an object as the jsonl sink writes it: {err}")))?;
        if o.category.is_some() && o.annotation.is_none() {
            return Err(parse(
                "an object of schema version 1 (a \"category\" that may be a detector's class): score the output of this version, whose annotated category is \"annotation\"".into(),
            ));
        }
        all += 1;
        let Some(annotation) = o.annotation else {
            match o.detection {
                Some(_) => none.detected += 1,
                None => none.unnamed += 1,
            }
            if none.first == 0 {
                none.first = i + 1;
            }
            continue;
        };
        let Some(label) = o.label else {
            e.unlabelled += 1;
            continue;
        };
        if !map.names(&label) {
            *unknown.entry(label).or_default() += 1;
            continue;
        }
        let Some(row) = map.label_of(annotation.category_id) else {
            e.uncounted += 1;
            continue;
        };
        e.rows[row].annotated += 1;
        e.rows[row].right += u64::from(e.rows[row].label == label);
    }
    if none.first > 0 {
        return Err(EvalError::NoCategory {
            path: path.to_string(),
            found: none.found(all),
        });
    }
    if !unknown.is_empty() {
        return Err(EvalError::UnknownLabels {
            path: path.to_string(),
            count: unknown.values().sum(),
            labels: counted(&unknown),
            known: map.labels(),
        });
    }
    Ok(e)
}

/// `name (count), ...` of names counted, the most frequent first (at most 10 named).
pub(crate) fn counted<N: fmt::Display>(counts: &std::collections::BTreeMap<N, u64>) -> String {
    let mut list: Vec<(&N, &u64)> = counts.iter().collect();
    list.sort_by(|a, b| b.1.cmp(a.1));
    let mut text: Vec<String> = list
        .iter()
        .take(10)
        .map(|(n, c)| format!("{n} ({c})"))
        .collect();
    if list.len() > 10 {
        text.push(format!("and {} more", list.len() - 10));
    }
    text.join(", ")
}

/// `octopipe eval labels`: the objects of a JSONL file.
pub(crate) fn evaluate_file(objects: &Path, map: &LabelMap) -> Result<LabelsEvaluation, EvalError> {
    let text = std::fs::read_to_string(objects)
        .map_err(|e| FileError::io(objects.display().to_string(), e))?;
    evaluate(&text, &objects.display().to_string(), map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_scored_against_their_categories() {
        let text = [
            r#"{"label":"car","annotation":{"category_id":4}}"#,
            r#"{"label":"car","annotation":{"category_id":5}}"#,
            r#"{"label":"person","annotation":{"category_id":2,"category":"people"}}"#,
            r#"{"annotation":{"category_id":4}}"#,
            r#"{"label":"car","annotation":{"category_id":11}}"#,
        ]
        .join("\n");
        let e = evaluate(&text, "o", &LabelMap::visdrone_crops()).unwrap();
        assert_eq!(e.total(), (3, 2));
        assert_eq!((e.unlabelled, e.uncounted), (1, 1));
        let table = e.to_string();
        assert!(
            table.ends_with("labelled as annotated: 2 of 3 (66.7%); not scored: 1 objects with no label, 1 with no category a label stands for"),
            "{table}"
        );
        let map = LabelMap::parse("a=1+2, b=3").unwrap();
        assert_eq!(map.label_of(2), Some(0));
        let bad = LabelMap::parse("a=x").unwrap_err().to_string();
        assert_eq!(bad, "class map 'a=x': 'x' is not a category number");
    }

    #[test]
    fn labels_the_map_does_not_name_are_refused_by_name() {
        let text = [
            r#"{"label":"car","annotation":{"category_id":4}}"#,
            r#"{"label":"pedestrian","annotation":{"category_id":1}}"#,
            r#"{"label":"pedestrian","annotation":{"category_id":1}}"#,
            r#"{"label":"van","annotation":{"category_id":5}}"#,
        ]
        .join("\n");
        let e = evaluate(&text, "o.jsonl", &LabelMap::visdrone_crops())
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "o.jsonl: 3 objects carry labels the class map does not name: pedestrian (2), van (1): name them in --classes LABEL=CAT+CAT,... (the map's labels: person, two-wheeler, car, large-vehicle)"
        );
        let map = LabelMap::parse("car=4,pedestrian=1,van=5").unwrap();
        assert_eq!(evaluate(&text, "o.jsonl", &map).unwrap().total(), (4, 4));
    }

    #[test]
    fn objects_with_no_annotated_category_are_refused() {
        let map = LabelMap::visdrone_crops();
        let detected = r#"{"label":"car","detection":{"class_id":2,"label":"car","score":0.9}}"#;
        let text = [detected, detected].join("\n");
        let e = evaluate(&text, "o.jsonl", &map).unwrap_err().to_string();
        assert!(
            e.starts_with(
                "o.jsonl: 2 objects carry a detector class, none an annotated category: "
            ),
            "{e}"
        );
        let mixed = [
            r#"{"label":"car","annotation":{"category_id":4}}"#,
            detected,
            "{}",
        ]
        .join("\n");
        let e = evaluate(&mixed, "o.jsonl", &map).unwrap_err().to_string();
        assert!(
            e.starts_with("o.jsonl: 2 of 3 objects carry no annotated category (1 a detector class, 1 no class; the first at line 2): "),
            "{e}"
        );
        let old = evaluate(r#"{"label":"car","category":4}"#, "o.jsonl", &map)
            .unwrap_err()
            .to_string();
        assert!(
            old.starts_with("o.jsonl:1: an object of schema version 1 "),
            "{old}"
        );
    }
}
