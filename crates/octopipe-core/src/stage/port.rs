//! Typed ports: what travels on an edge. An [`Item`] names a payload type (a value, so roles and
//! messages can say "frames" or "batches"); a [`Payload`] is a type that may travel, saying which
//! frames it carries so the runner can stamp their times and count them when it is dropped.
//!
//! The set is open: a crate defines its own payload (an application's embeddings made from
//! frames by its own stage) by implementing [`Payload`], and names it [`Item::of`] in its
//! stages' roles ([`Role::Convert`](super::Role::Convert), [`Role::Filter`](super::Role::Filter)).
//! The built-in ones are [`Item::FRAMES`] ([`Frame`]) and [`Item::BATCHES`] ([`CropBatch`]).
//!
//! ```
//! # use octopipe_core::stage::{Item, Payload};
//! # use octopipe_core::frame::Frame;
//! /// One vector per frame, with the frame it came from.
//! struct Embedding {
//!     frame: Frame,
//!     vector: Vec<f32>,
//! }
//!
//! impl Payload for Embedding {
//!     const NAME: &'static str = "embeddings";
//!     // Its frame's times are stamped as it travels, and a drop counts it.
//!     fn frames(&self) -> &[Frame] {
//!         std::slice::from_ref(&self.frame)
//!     }
//!     fn frames_mut(&mut self) -> &mut [Frame] {
//!         std::slice::from_mut(&mut self.frame)
//!     }
//! }
//!
//! const EMBEDDINGS: Item = Item::of::<Embedding>();
//! assert_eq!(EMBEDDINGS.to_string(), "embeddings");
//! assert_ne!(EMBEDDINGS, Item::FRAMES);
//! ```

use std::any::TypeId;
use std::fmt;
use std::time::Instant;

use crate::budget::Tally;
use crate::crops::CropBatch;
use crate::frame::{Frame, StageSlot};

/// What travels on an edge: a payload type, by its name and its `TypeId`. Two items are equal
/// when they name the same type.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Item {
    name: &'static str,
    id: TypeId,
}

impl Item {
    /// Single frames (with their boxes).
    pub const FRAMES: Item = Item::of::<Frame>();
    /// Crop batches (frames, crops, block metadata, the tensor).
    pub const BATCHES: Item = Item::of::<CropBatch>();

    /// The item of payload type `T`.
    pub const fn of<T: Payload>() -> Item {
        Item {
            name: T::NAME,
            id: TypeId::of::<T>(),
        }
    }

    /// Its name, as messages and `inspect` show it (`frames`, `batches`).
    pub fn name(self) -> &'static str {
        self.name
    }

    /// Whether it is the item of payload type `T`.
    pub fn is<T: Payload>(self) -> bool {
        self.id == TypeId::of::<T>()
    }
}

impl fmt::Display for Item {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name)
    }
}

impl fmt::Debug for Item {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Item({})", self.name)
    }
}

/// A type that travels on an edge: what the runner needs of it. A payload that carries frames
/// says so ([`Payload::frames`], [`Payload::frames_mut`]): the runner then stamps their times as
/// it passes each stage (the stage's row in the report) and counts them when it is dropped (a
/// live edge's oldest, a stream removed), so the report's `in = processed + dropped` holds. A
/// payload with no frames travels untimed and uncounted.
pub trait Payload: Send + 'static {
    /// Its name in messages and `inspect` (plural, lower case: `frames`, `batches`).
    const NAME: &'static str;

    /// The frames it carries.
    fn frames(&self) -> &[Frame] {
        &[]
    }

    /// The frames it carries, to stamp.
    fn frames_mut(&mut self) -> &mut [Frame] {
        &mut []
    }

    /// Record that every frame in it passed stage `slot` at `at`.
    fn stamp(&mut self, slot: StageSlot, at: Instant) {
        for f in self.frames_mut() {
            f.times.mark(slot, at);
        }
    }

    /// Record that stage `slot` took it from its queue at `at` (each frame's wait before it).
    fn took(&mut self, slot: StageSlot, at: Instant) {
        for f in self.frames_mut() {
            f.times.took(slot, at);
        }
    }

    /// Count its frames (and their boxes) as dropped for `reason`.
    fn count_drop(&self, tally: &Tally, reason: &str) {
        for f in self.frames() {
            count_frame_drop(f, tally, reason);
        }
    }
}

/// Count a dropped frame: a frame in parts is counted once, by its last part; an earlier part's
/// boxes are counted alone.
fn count_frame_drop(frame: &Frame, tally: &Tally, reason: &str) {
    let boxes = frame.detections.len() as u64;
    tally.with(|t| match frame.part.is_last() {
        true => t.drop_frame(frame.stream, reason, boxes),
        false => t.drop_boxes(reason, boxes),
    });
}

impl Payload for Frame {
    const NAME: &'static str = "frames";
    fn frames(&self) -> &[Frame] {
        std::slice::from_ref(self)
    }
    fn frames_mut(&mut self) -> &mut [Frame] {
        std::slice::from_mut(self)
    }
}

impl Payload for CropBatch {
    const NAME: &'static str = "batches";
    fn frames(&self) -> &[Frame] {
        &self.frames
    }
    fn frames_mut(&mut self) -> &mut [Frame] {
        &mut self.frames
    }
}
