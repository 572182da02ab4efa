//! A decoded frame's planes before the source makes them a [`Frame`](octopipe_core::frame::Frame):
//! what GStreamer's decoders and nvJPEG hand over.

use octopipe_core::frame::{DeviceFrame, FrameLayout, PooledBuf};

/// A decoded frame's planes and their geometry.
pub(crate) enum Pixels {
    /// In a host buffer (copied from the decoder's, or decoded into it).
    Host(PooledBuf, FrameLayout),
    /// In CUDA memory (a decoder's buffer, mapped, or nvJPEG's output).
    Device(DeviceFrame, FrameLayout),
}
