//! What the application gives back for a batch: labels, class ids or its model's scores, checked
//! against the batch and turned into each row's [`Classification`].

use std::sync::{Arc, Mutex};

use crossbeam_channel::Sender;

use crate::classify::{softmax, top_k};
use octopipe_core::frame::{ClassScore, Classification};

/// The application's answer for the rows of one batch, in row order.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Labels {
    /// A class id per row; names from the stage's `labels=` (`class{id}` without it).
    Ids {
        /// The class ids.
        ids: Vec<u32>,
        /// A score per row (1 when not given).
        scores: Option<Vec<f32>>,
    },
    /// A class name per row. With `labels=`, each must be one of them (its class id is its
    /// place there); without, a name's class id is the order it first came in during the run.
    Names {
        /// The names.
        names: Vec<String>,
        /// A score per row (1 when not given).
        scores: Option<Vec<f32>>,
    },
    /// The model's output: `rows x classes` values, row after row; the best `top-k` classes of
    /// each row are kept, after a softmax when `softmax` (logits), as they are when not
    /// (probabilities).
    Scores {
        /// The values.
        values: Vec<f32>,
        /// Values per row.
        classes: usize,
        /// Whether the values are logits (softmax applied) rather than probabilities.
        softmax: bool,
    },
}

/// Labels that do not fit their batch.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum LabelError {
    /// Not one answer per row.
    #[error("appinfer '{stage}': batch {batch} has {rows} rows, but {given} {what} were given")]
    Rows {
        /// The stage's name.
        stage: String,
        /// The batch's number.
        batch: u64,
        /// Its rows.
        rows: usize,
        /// What was given.
        given: usize,
        /// Of what (`labels`, `scores`, `rows of scores`).
        what: &'static str,
    },
    /// A class id or name the stage's `labels=` does not have, or a row of scores whose
    /// length is not the number of classes.
    #[error("appinfer '{stage}': batch {batch}, row {row}: {reason}")]
    Class {
        /// The stage's name.
        stage: String,
        /// The batch's number.
        batch: u64,
        /// The row.
        row: usize,
        /// What is wrong.
        reason: String,
    },
    /// Labels were given already, or the pipeline no longer waits for them (it stopped).
    #[error("appinfer '{stage}': batch {batch}: {reason}")]
    Gone {
        /// The stage's name.
        stage: String,
        /// The batch's number.
        batch: u64,
        /// Why.
        reason: &'static str,
    },
}

/// What the stage knows of its classes, shared with every [`Reply`].
#[derive(Debug)]
pub(super) struct Classes {
    pub(super) stage: String,
    /// `labels=`, in class-id order (empty: none given).
    pub(super) labels: Vec<Arc<str>>,
    /// Without `labels=`: names given as [`Labels::Names`], in the order they first came.
    pub(super) seen: Mutex<Vec<Arc<str>>>,
    pub(super) top_k: usize,
}

impl Classes {
    fn name(&self, id: u32) -> Arc<str> {
        match self.labels.get(id as usize) {
            Some(l) => l.clone(),
            None => Arc::from(format!("class{id}")),
        }
    }

    /// The class id of `name`: its place in `labels=`, or (without it) the order it came in.
    fn id_of(&self, name: &str) -> Result<(u32, Arc<str>), String> {
        if !self.labels.is_empty() {
            return match self.labels.iter().position(|l| &**l == name) {
                Some(i) => Ok((i as u32, self.labels[i].clone())),
                None => Err(format!(
                    "label '{name}' is not one of labels={}",
                    self.labels.join(",")
                )),
            };
        }
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let i = match seen.iter().position(|l| &**l == name) {
            Some(i) => i,
            None => {
                seen.push(Arc::from(name));
                seen.len() - 1
            }
        };
        Ok((i as u32, seen[i].clone()))
    }
}

/// The way back for one batch's labels: [`Reply::send`] them once. Dropping it unsent passes
/// the batch on without labels (counted in the report).
#[derive(Debug)]
pub struct Reply {
    /// `None` once labels were sent.
    pub(super) tx: Option<Sender<Vec<Classification>>>,
    pub(super) rows: usize,
    pub(super) batch: u64,
    pub(super) classes: Arc<Classes>,
}

impl Reply {
    /// The batch's number (0, 1, ... in the order the stage handed batches out).
    pub fn batch(&self) -> u64 {
        self.batch
    }

    /// The batch's rows (crops).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Whether labels were sent.
    pub fn is_sent(&self) -> bool {
        self.tx.is_none()
    }

    /// Check `labels` against the batch and hand them to the stage, which writes them onto
    /// the batch's objects and passes it on. Labels that do not fit are an error and may be
    /// given again; labels are sent once.
    pub fn send(&mut self, labels: Labels) -> Result<(), LabelError> {
        let gone = |reason| LabelError::Gone {
            stage: self.classes.stage.clone(),
            batch: self.batch,
            reason,
        };
        if self.tx.is_none() {
            return Err(gone("labels were given already"));
        }
        let answer = self.answer(labels)?;
        let sent = self.tx.take().map(|tx| tx.send(answer));
        match sent {
            Some(Ok(())) => Ok(()),
            _ => Err(gone(
                "the pipeline no longer waits for its labels (it stopped)",
            )),
        }
    }

    /// Each row's classification.
    fn answer(&self, labels: Labels) -> Result<Vec<Classification>, LabelError> {
        let c = &self.classes;
        let rows_error = |given: usize, what: &'static str| LabelError::Rows {
            stage: c.stage.clone(),
            batch: self.batch,
            rows: self.rows,
            given,
            what,
        };
        let class_error = |row: usize, reason: String| LabelError::Class {
            stage: c.stage.clone(),
            batch: self.batch,
            row,
            reason,
        };
        let scores_of = |scores: Option<Vec<f32>>| -> Result<Vec<f32>, LabelError> {
            let scores = scores.unwrap_or_else(|| vec![1.0; self.rows]);
            if scores.len() != self.rows {
                return Err(rows_error(scores.len(), "scores"));
            }
            match scores.iter().position(|s| !s.is_finite()) {
                Some(row) => Err(class_error(
                    row,
                    format!("score {} is not finite", scores[row]),
                )),
                None => Ok(scores),
            }
        };
        let single = |class_id: u32, label: Arc<str>, score: f32| Classification {
            best: ClassScore {
                class_id,
                label,
                score,
            },
            topk: Vec::new(),
        };
        match labels {
            Labels::Ids { ids, scores } => {
                if ids.len() != self.rows {
                    return Err(rows_error(ids.len(), "labels"));
                }
                let scores = scores_of(scores)?;
                ids.iter()
                    .zip(scores)
                    .enumerate()
                    .map(|(row, (&id, score))| {
                        if !c.labels.is_empty() && id as usize >= c.labels.len() {
                            return Err(class_error(
                                row,
                                format!(
                                    "class id {id} is not one of the {} classes of labels={}",
                                    c.labels.len(),
                                    c.labels.join(",")
                                ),
                            ));
                        }
                        Ok(single(id, c.name(id), score))
                    })
                    .collect()
            }
            Labels::Names { names, scores } => {
                if names.len() != self.rows {
                    return Err(rows_error(names.len(), "labels"));
                }
                let scores = scores_of(scores)?;
                names
                    .iter()
                    .zip(scores)
                    .enumerate()
                    .map(|(row, (name, score))| {
                        let (id, label) = c.id_of(name).map_err(|r| class_error(row, r))?;
                        Ok(single(id, label, score))
                    })
                    .collect()
            }
            Labels::Scores {
                mut values,
                classes,
                softmax: logits,
            } => {
                if classes == 0 || values.len() != self.rows * classes {
                    let given = values.len().checked_div(classes).unwrap_or(0);
                    return Err(rows_error(given, "rows of scores"));
                }
                if !c.labels.is_empty() && classes != c.labels.len() {
                    return Err(class_error(
                        0,
                        format!(
                            "{classes} scores per row, but labels= names {} classes",
                            c.labels.len()
                        ),
                    ));
                }
                values
                    .chunks_mut(classes)
                    .enumerate()
                    .map(|(row, v)| {
                        if let Some(x) = v.iter().find(|x| !x.is_finite()) {
                            return Err(class_error(row, format!("score {x} is not finite")));
                        }
                        if logits {
                            softmax(v);
                        }
                        let mut ranked = top_k(v, c.top_k).into_iter();
                        let (id, score) = ranked.next().unwrap_or((0, 0.0));
                        let mut answer = single(id, c.name(id), score);
                        answer.topk = ranked
                            .map(|(id, score)| ClassScore {
                                class_id: id,
                                label: c.name(id),
                                score,
                            })
                            .collect();
                        Ok(answer)
                    })
                    .collect()
            }
        }
    }
}
