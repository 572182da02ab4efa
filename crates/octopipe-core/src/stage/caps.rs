//! What stages tell each other before they open ([`Caps`]): one value of any type, keyed by its
//! type ([`Caps::insert`], [`Caps::get`]), each type owned by the stage that tells it; and the
//! few requests that cross crates, here so that neither side needs the other's crate
//! ([`PageLocked`]: a stage asking the sources for page-locked frames).

use std::any::{Any, TypeId};
use std::collections::{HashMap, HashSet};
use std::fmt;

/// What stages tell each other before they open: set in [`Element::configure`](super::Element::configure) (source to
/// sink) and settled in [`Element::open`](super::Element::open) (sink to source).
///
/// It holds one value of any type, keyed by that type, and names no stage: each stage tells
/// later stages something with a type of its own, editing nothing here. The built-in stages'
/// values: the preprocess stage's settings (`octopipe::preprocess::PreprocessConfig`, their
/// output size settled by the model when it opens; `pipeline.caps().get::<PreprocessConfig>()`),
/// the classifier's or `appinfer`'s class names (`octopipe::classify::ClassLabels`), a
/// detector's score threshold on its branch (`octopipe::track::DetectScore`, which a `track`
/// after it follows), a tracker following the boxes (`octopipe::track::Tracked`, which lets a
/// detector before it leave frames to the tracker), and the classifier's `reinfer-interval`
/// when above 1 (a [`Reinfer`](super::Reinfer): the batch stage, opened after it, makes no crop
/// of a tracked box whose track's label is reused), and the CUDA preprocess backend's request
/// for page-locked frames ([`PageLocked`], which the sources read).
///
/// ```
/// # use octopipe_core::stage::Caps;
/// #[derive(Debug, Clone, PartialEq)]
/// struct EmbeddingSize(usize);
///
/// let mut caps = Caps::default();
/// caps.insert(EmbeddingSize(128));
/// assert_eq!(caps.get::<EmbeddingSize>(), Some(&EmbeddingSize(128)));
/// caps.get_mut::<EmbeddingSize>().unwrap().0 = 256;
/// assert_eq!(caps.remove::<EmbeddingSize>(), Some(EmbeddingSize(256)));
/// assert!(caps.get::<EmbeddingSize>().is_none());
///
/// // A value about the frames of one branch is forgotten where the next branch starts.
/// #[derive(Debug, Clone, PartialEq)]
/// struct Threshold(f32);
/// caps.insert_for_branch(Threshold(0.5));
/// caps.begin_branch();
/// assert!(caps.get::<Threshold>().is_none());
/// ```
#[derive(Debug, Clone, Default)]
pub struct Caps {
    /// Values of the stages' own types, one per type.
    extensions: Extensions,
    /// The types of the values told with [`Caps::insert_for_branch`], forgotten where a branch
    /// starts.
    branch: HashSet<TypeId>,
}

impl Caps {
    /// Tell later stages `value`, replacing (and returning) any earlier value of its type.
    pub fn insert<T: Any + Clone + fmt::Debug + Send + Sync>(&mut self, value: T) -> Option<T> {
        self.branch.remove(&TypeId::of::<T>());
        let old = self
            .extensions
            .0
            .insert(TypeId::of::<T>(), Box::new(value))?;
        old.into_any().downcast().ok().map(|v| *v)
    }

    /// Tell the later stages of this branch `value`, something about the branch's own frames:
    /// as [`Caps::insert`], but forgotten where the next branch starts ([`Caps::begin_branch`]).
    pub fn insert_for_branch<T: Any + Clone + fmt::Debug + Send + Sync>(
        &mut self,
        value: T,
    ) -> Option<T> {
        let old = self.insert(value);
        self.branch.insert(TypeId::of::<T>());
        old
    }

    /// The value of type `T`, if a stage told one.
    pub fn get<T: Any>(&self) -> Option<&T> {
        let value: &dyn Extension = self.extensions.0.get(&TypeId::of::<T>())?.as_ref();
        value.as_any().downcast_ref()
    }

    /// The value of type `T`, to change it.
    pub fn get_mut<T: Any>(&mut self) -> Option<&mut T> {
        let value: &mut dyn Extension = self.extensions.0.get_mut(&TypeId::of::<T>())?.as_mut();
        value.as_any_mut().downcast_mut()
    }

    /// Take out the value of type `T`.
    pub fn remove<T: Any>(&mut self) -> Option<T> {
        self.branch.remove(&TypeId::of::<T>());
        let value = self.extensions.0.remove(&TypeId::of::<T>())?;
        value.into_any().downcast().ok().map(|v| *v)
    }

    /// A branch starts (its source is configured next): forget what the stages of the branch
    /// before said about their own frames (the values told with [`Caps::insert_for_branch`]).
    pub fn begin_branch(&mut self) {
        for id in self.branch.drain() {
            self.extensions.0.remove(&id);
        }
    }
}

/// A request for page-locked host frames, told by a stage that reads host frames in place from
/// the GPU (the CUDA preprocess backend gathering crop rectangles, `preprocess gather=auto|device`):
/// the sources upstream then copy the frames they decode on the host into page-locked buffers
/// allocated in `device`'s context. Absent, frames are pageable.
///
/// ```
/// # use octopipe_core::stage::{Caps, PageLocked};
/// let mut caps = Caps::default();
/// caps.insert(PageLocked::new(0));
/// assert_eq!(caps.get::<PageLocked>().map(|p| p.device), Some(0));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PageLocked {
    /// The CUDA device whose context allocates the page-locked frames.
    pub device: usize,
}

impl PageLocked {
    /// Page-locked frames for `device`.
    pub fn new(device: usize) -> PageLocked {
        PageLocked { device }
    }
}

/// A value in [`Caps`]' map: cloned with the caps (a stream added while running configures its
/// stages on a copy), shown by their `Debug`.
trait Extension: Any + fmt::Debug + Send + Sync {
    fn clone_box(&self) -> Box<dyn Extension>;
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
}

impl<T: Any + Clone + fmt::Debug + Send + Sync> Extension for T {
    fn clone_box(&self) -> Box<dyn Extension> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// The values of [`Caps`]' map, by type.
#[derive(Default)]
struct Extensions(HashMap<TypeId, Box<dyn Extension>>);

impl Clone for Extensions {
    fn clone(&self) -> Self {
        Extensions(
            self.0
                .iter()
                .map(|(k, v)| (*k, v.as_ref().clone_box()))
                .collect(),
        )
    }
}

impl fmt::Debug for Extensions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.values()).finish()
    }
}
