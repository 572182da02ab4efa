//! Scoring a classifier's labels against the annotated VisDrone categories (`octopipe eval
//! labels`): the objects a `jsonl` sink wrote from annotation boxes (each with its `category`)
//! through a classifier (its `label`).
//!
//! ```text
//! octopipe eval labels --objects objects.jsonl
//! ```
//!
//! A label stands for a set of categories ([`LabelMap`]; by default the shared classifier's:
//! `person` 1, 2; `two-wheeler` 3, 7, 8, 10; `car` 4; `large-vehicle` 5, 6, 9). An object is
//! labelled as annotated when its category is among its label's. Objects with no label (no
//! classifier, non-finite logits) or with a category no label stands for (0 ignored regions,
//! 11 others) are counted apart.

use std::fmt;
use std::path::Path;

use serde::Deserialize;

use super::EvalError;

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
    category: Option<u32>,
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
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let o: Line = serde_json::from_str(line).map_err(|err| EvalError::Parse {
            path: path.to_string(),
            line: i + 1,
            reason: format!("not an object as the jsonl sink writes it: {err}"),
        })?;
        let Some(label) = o.label else {
            e.unlabelled += 1;
            continue;
        };
        let Some(row) = o.category.and_then(|c| map.label_of(c)) else {
            e.uncounted += 1;
            continue;
        };
        e.rows[row].annotated += 1;
        e.rows[row].right += u64::from(e.rows[row].label == label);
    }
    Ok(e)
}

/// `octopipe eval labels`: the objects of a JSONL file.
pub(crate) fn evaluate_file(objects: &Path, map: &LabelMap) -> Result<LabelsEvaluation, EvalError> {
    let text = std::fs::read_to_string(objects).map_err(|e| EvalError::Io {
        path: objects.display().to_string(),
        reason: e.to_string(),
        source: Some(e),
    })?;
    evaluate(&text, &objects.display().to_string(), map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_scored_against_their_categories() {
        let text = [
            r#"{"label":"car","category":4}"#,
            r#"{"label":"car","category":5}"#,
            r#"{"label":"person","category":2}"#,
            r#"{"category":4}"#,
            r#"{"label":"car","category":11}"#,
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
}
