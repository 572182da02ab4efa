//! What the detector model's input takes and its outputs give, read from the model (an ONNX
//! Runtime session of it): the input's name, size, layout and element type, the outputs the
//! decoder reads, and what the model's metadata states (score form, input range).

use ort::session::Session;
use ort::value::{TensorElementType, ValueType};

use super::centernet::Scores;
use super::error::IoError;
use super::{Decoder, DetectConfig};
use octopipe_stages::preprocess::{DType, Layout};

/// What the model's input and outputs are.
#[derive(Debug, Clone)]
pub(super) struct Io {
    /// The input's name.
    pub input: String,
    /// The input's (width, height).
    pub size: (u32, u32),
    /// The input's layout.
    pub layout: Layout,
    /// The input's element type.
    pub dtype: DType,
    /// The fixed batch size, if the model has one.
    pub batch: Option<usize>,
    /// The outputs read (as many as the decoder reads), with their element types.
    pub outputs: Vec<(String, DType)>,
    /// How they are read.
    pub decoder: Decoder,
    /// What CenterNet score maps hold (the model's metadata `octopipe.scores`).
    pub scores: Scores,
    /// The `scale` of the input range the model's metadata states (`octopipe.input_range`:
    /// `0..1` is 1/255, `0..255` is 1), if it states one.
    pub input_scale: Option<f32>,
}

/// Read the model's input (rank 4, 3 channels, f32 or f16; the layout from where the 3 is) and
/// pick its output and decoder.
pub(super) fn model_io(session: &Session, config: &DetectConfig) -> Result<Io, IoError> {
    let input = session.inputs().first().ok_or(IoError::NoInput)?;
    let name = input.name().to_string();
    let ValueType::Tensor { ty, shape, .. } = input.dtype() else {
        return Err(IoError::NotTensor(name));
    };
    let dtype = element(*ty).ok_or_else(|| IoError::InputType {
        name: name.clone(),
        ty: format!("{ty:?}"),
    })?;
    let layout = match &shape[..] {
        [_, 3, _, _] => Layout::Nchw,
        [_, _, _, 3] => Layout::Nhwc,
        _ => {
            return Err(IoError::NotImage {
                name,
                shape: shape.to_vec(),
            })
        }
    };
    let (h, w) = match layout {
        Layout::Nchw => (shape[2], shape[3]),
        Layout::Nhwc => (shape[1], shape[2]),
    };
    let side = i64::from(octopipe_core::stage::limits::MAX_INPUT_SIDE);
    if w > side || h > side {
        return Err(IoError::TooLarge { name, w, h, side });
    }
    let fixed = (w > 0 && h > 0).then_some((w as u32, h as u32));
    let size = match (fixed, config.size) {
        (Some(m), Some(s)) if m != s => {
            return Err(IoError::SizeGiven {
                name,
                model: m,
                given: s,
            })
        }
        (Some(m), _) => m,
        (None, Some(s)) => s,
        (None, None) => {
            return Err(IoError::DynamicSize {
                name,
                shape: shape.to_vec(),
            })
        }
    };
    let outputs: Vec<(String, Vec<i64>, Option<DType>)> = session
        .outputs()
        .iter()
        .map(|o| match o.dtype() {
            ValueType::Tensor { ty, shape, .. } => {
                (o.name().to_string(), shape.to_vec(), element(*ty))
            }
            _ => (o.name().to_string(), Vec::new(), None),
        })
        .collect();
    let listed = || {
        outputs
            .iter()
            .map(|(n, s, _)| format!("'{n}' {s:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let fits = |s: &[i64]| match config.decoder {
        Some(d) => d.check(s).is_ok(),
        None => Decoder::detect(s).is_some(),
    };
    let named = |want: &String| {
        outputs
            .iter()
            .position(|(n, _, _)| n == want)
            .ok_or_else(|| IoError::NoOutput {
                want: want.clone(),
                outputs: listed(),
            })
    };
    let shapes: Vec<&[i64]> = outputs.iter().map(|(_, s, _)| s.as_slice()).collect();
    let pair = || Decoder::centernet_pair(&shapes).map(|(a, b)| vec![a, b]);
    // The outputs read, and how.
    let (picked, decoder): (Vec<usize>, Decoder) = match (config.decoder, &config.output[..]) {
        (Some(Decoder::CenterNet), [heat, wh]) => {
            (vec![named(heat)?, named(wh)?], Decoder::CenterNet)
        }
        (Some(Decoder::CenterNet), []) => (
            pair().ok_or_else(|| IoError::NoHeads { outputs: listed() })?,
            Decoder::CenterNet,
        ),
        (Some(Decoder::CenterNet), _) => return Err(IoError::TwoHeads),
        (decoder, [want]) => {
            let i = named(want)?;
            let d = match decoder {
                Some(d) => d,
                None => Decoder::detect(&outputs[i].1).ok_or_else(|| IoError::NoDecoder {
                    name: want.clone(),
                    shape: outputs[i].1.clone(),
                })?,
            };
            (vec![i], d)
        }
        (None, []) => match outputs.iter().position(|(_, s, _)| fits(s)) {
            Some(i) => (vec![i], Decoder::detect(&outputs[i].1).expect("it fits")),
            None => (
                pair().ok_or_else(|| IoError::NoDetections {
                    decoder: "auto",
                    outputs: listed(),
                })?,
                Decoder::CenterNet,
            ),
        },
        (Some(d), []) => (
            vec![outputs
                .iter()
                .position(|(_, s, _)| fits(s))
                .ok_or_else(|| IoError::NoDetections {
                    decoder: d.name(),
                    outputs: listed(),
                })?],
            d,
        ),
        (_, more) => {
            return Err(IoError::OutputCount {
                count: more.len(),
                decoder: config.decoder.map_or("auto", Decoder::name),
            })
        }
    };
    let scores = match session.metadata().ok().and_then(|m| m.custom(SCORES_KEY)) {
        None => Scores::Probabilities,
        Some(v) if v == "probabilities" => Scores::Probabilities,
        Some(v) if v == "logits" => Scores::Logits,
        Some(v) => {
            return Err(IoError::Metadata {
                key: SCORES_KEY,
                value: v,
                allowed: "probabilities or logits",
            })
        }
    };
    let input_scale = match session
        .metadata()
        .ok()
        .and_then(|m| m.custom(INPUT_RANGE_KEY))
    {
        None => None,
        Some(v) if v == "0..1" => Some(1.0 / 255.0),
        Some(v) if v == "0..255" => Some(1.0),
        Some(v) => {
            return Err(IoError::Metadata {
                key: INPUT_RANGE_KEY,
                value: v,
                allowed: "0..1 or 0..255",
            })
        }
    };
    // Labels that do not name the model's classes one for one would put names on the wrong
    // boxes (a model cut to some of COCO's classes, run with labels=coco).
    let classes = picked.first().and_then(|&i| decoder.classes(&outputs[i].1));
    if let Some(n) = classes.filter(|&n| !config.labels.is_empty() && n != config.labels.len()) {
        return Err(IoError::Labels {
            classes: n,
            labels: config.labels.clone(),
            hint: fewer_labels_hint(&config.labels, n),
        });
    }
    let mut read = Vec::with_capacity(picked.len());
    for i in picked {
        let (out_name, out_shape, out_dtype) = &outputs[i];
        decoder
            .check(out_shape)
            .map_err(|source| IoError::OutputShape {
                name: out_name.clone(),
                shape: out_shape.clone(),
                source,
            })?;
        let dtype = out_dtype.ok_or_else(|| IoError::OutputType(out_name.clone()))?;
        read.push((out_name.clone(), dtype));
    }
    Ok(Io {
        input: name,
        size,
        layout,
        dtype,
        batch: (shape[0] > 0).then_some(shape[0] as usize),
        outputs: read,
        decoder,
        scores,
        input_scale,
    })
}

/// The model metadata key that states the input range the model was trained on: `0..1` (the
/// default `scale`, 1/255) or `0..255` (`scale=1`); it is the default of `scale`.
pub(crate) const INPUT_RANGE_KEY: &str = "octopipe.input_range";

/// For `labels` fewer than the model's `classes`: how to keep only those classes (`classes=`),
/// naming COCO's list where every label is a COCO name of an 80-class model.
pub(super) fn fewer_labels_hint(labels: &[String], classes: usize) -> String {
    if labels.is_empty() || labels.len() >= classes {
        return String::new();
    }
    let coco = classes == super::COCO_LABELS.len()
        && labels
            .iter()
            .all(|l| super::COCO_LABELS.contains(&l.as_str()));
    let all = if coco {
        "labels=coco"
    } else {
        "labels=NAMES-OF-ALL-CLASSES"
    };
    format!(
        "; to keep only some classes, name them all and pick with classes= (did you mean {all} classes={}?)",
        labels.join(",")
    )
}

/// The model metadata key that says what a CenterNet score map holds: `probabilities` (the
/// default) or `logits` (`scripts/make_centernet_heads.py --logits`).
pub(crate) const SCORES_KEY: &str = "octopipe.scores";

fn element(ty: TensorElementType) -> Option<DType> {
    match ty {
        TensorElementType::Float32 => Some(DType::F32),
        TensorElementType::Float16 => Some(DType::F16),
        _ => None,
    }
}
