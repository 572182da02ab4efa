//! The output tensor as the parallel tasks write it.

#[derive(Clone, Copy)]
/// The output tensor's start, shared by the tasks that write its disjoint ranges.
pub(super) struct OutPtr(pub(super) *mut f32);
// SAFETY: tasks write disjoint ranges (see `CpuBackend::fill`).
unsafe impl Send for OutPtr {}
unsafe impl Sync for OutPtr {}
