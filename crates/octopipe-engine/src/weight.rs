//! The initializers as typed weights: their element type, shape and values, read from an ONNX
//! `TensorProto` with its declared size checked against its bytes.

use half::f16;

use crate::proto;

/// Why a weight was refused.
#[derive(Debug, thiserror::Error)]
#[error("weight {name:?}: {reason}")]
pub struct WeightError {
    /// The initializer's name.
    pub name: String,
    /// What is wrong with it: its type, its location or its size.
    pub reason: String,
}

/// A tensor's element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ElemType {
    /// float32.
    F32,
    /// float16.
    F16,
    /// int64 (shapes, axes).
    I64,
    /// int32.
    I32,
}

impl ElemType {
    /// The type of ONNX's `TensorProto.DataType` code, if the engine reads it.
    pub fn from_onnx(code: i32) -> Option<ElemType> {
        match code {
            1 => Some(ElemType::F32),
            10 => Some(ElemType::F16),
            7 => Some(ElemType::I64),
            6 => Some(ElemType::I32),
            _ => None,
        }
    }

    /// Bytes per element.
    pub fn size(self) -> u64 {
        match self {
            ElemType::F16 => 2,
            ElemType::F32 | ElemType::I32 => 4,
            ElemType::I64 => 8,
        }
    }
}

/// A weight's values.
#[derive(Clone, Debug, PartialEq)]
pub enum WeightData {
    /// float32 values.
    F32(Vec<f32>),
    /// float16 values.
    F16(Vec<f16>),
    /// int64 values.
    I64(Vec<i64>),
    /// int32 values.
    I32(Vec<i32>),
}

impl WeightData {
    /// The number of values.
    pub fn len(&self) -> usize {
        match self {
            WeightData::F32(v) => v.len(),
            WeightData::F16(v) => v.len(),
            WeightData::I64(v) => v.len(),
            WeightData::I32(v) => v.len(),
        }
    }

    /// Whether there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The values as f32 (integers converted), for the few the planner reads (Clip's bounds,
    /// Resize's scales).
    pub fn to_f32(&self) -> Vec<f32> {
        match self {
            WeightData::F32(v) => v.clone(),
            WeightData::F16(v) => v.iter().map(|x| x.to_f32()).collect(),
            WeightData::I64(v) => v.iter().map(|&x| x as f32).collect(),
            WeightData::I32(v) => v.iter().map(|&x| x as f32).collect(),
        }
    }
}

/// An initializer: a named constant tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct Weight {
    /// Its name.
    pub name: String,
    /// Its element type.
    pub elem: ElemType,
    /// Its shape.
    pub dims: Vec<u64>,
    /// Its values.
    pub data: WeightData,
}

impl Weight {
    /// Its size in bytes (elements times the element size).
    pub fn byte_size(&self) -> u64 {
        self.data.len() as u64 * self.elem.size()
    }
}

/// An initializer read into typed values, its declared size checked against its bytes.
pub(crate) fn read(t: proto::TensorProto) -> Result<Weight, WeightError> {
    let fail = |reason: String| WeightError {
        name: t.name.clone(),
        reason,
    };
    if t.data_location == 1 {
        return Err(fail(
            "its data is in an external file (the engine reads one self-contained file)".into(),
        ));
    }
    let elem = ElemType::from_onnx(t.data_type).ok_or_else(|| {
        fail(format!(
            "element type {} is not read (float16, float32, int64, int32 are)",
            t.data_type
        ))
    })?;
    let mut dims = Vec::with_capacity(t.dims.len());
    let mut count: u64 = 1;
    for &d in &t.dims {
        let d = u64::try_from(d).map_err(|_| fail(format!("negative dimension {d}")))?;
        count = count
            .checked_mul(d)
            .ok_or_else(|| fail("its shape's size overflows".into()))?;
        dims.push(d);
    }
    let declared = count
        .checked_mul(elem.size())
        .ok_or_else(|| fail("its shape's size overflows".into()))?;
    let mismatch = |actual: u64| {
        fail(format!(
            "its shape {:?} declares {declared} bytes but it holds {actual}",
            dims
        ))
    };
    let data = if !t.raw_data.is_empty() {
        let raw = &t.raw_data;
        if raw.len() as u64 != declared {
            return Err(mismatch(raw.len() as u64));
        }
        match elem {
            ElemType::F32 => WeightData::F32(
                raw.chunks_exact(4)
                    .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
                    .collect(),
            ),
            ElemType::F16 => WeightData::F16(
                raw.chunks_exact(2)
                    .map(|c| f16::from_le_bytes(c.try_into().expect("2 bytes")))
                    .collect(),
            ),
            ElemType::I64 => WeightData::I64(
                raw.chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
                    .collect(),
            ),
            ElemType::I32 => WeightData::I32(
                raw.chunks_exact(4)
                    .map(|c| i32::from_le_bytes(c.try_into().expect("4 bytes")))
                    .collect(),
            ),
        }
    } else {
        let data = match elem {
            ElemType::F32 => WeightData::F32(t.float_data.clone()),
            // FLOAT16 in the typed field: each value's 16 bits in an int32.
            ElemType::F16 => WeightData::F16(
                t.int32_data
                    .iter()
                    .map(|&b| f16::from_bits(b as u16))
                    .collect(),
            ),
            ElemType::I64 => WeightData::I64(t.int64_data.clone()),
            ElemType::I32 => WeightData::I32(t.int32_data.clone()),
        };
        if data.len() as u64 != count {
            return Err(mismatch(data.len() as u64 * elem.size()));
        }
        data
    };
    Ok(Weight {
        name: t.name,
        elem,
        dims,
        data,
    })
}
