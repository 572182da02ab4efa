//! The tile filter's section of the report (JSON: `sections.tiles`): tiles and bytes kept, the
//! downlink time before and after, the stage's own time.

use std::fmt;

use super::TileFilter;
use octopipe_core::budget::SectionKind;

/// What the tile filter kept of what it measured.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct TilesSection {
    /// The backend that measured (`cpu`, `cuda`).
    pub backend: String,
    /// Frames measured.
    pub frames: u64,
    /// Tiles measured, all frames.
    pub tiles: u64,
    /// Tiles kept.
    pub kept: u64,
    /// Raw bytes of all tiles (2 per 16-bit sample, 3 per pixel of colour frames).
    pub bytes: u64,
    /// Raw bytes of the kept tiles.
    pub kept_bytes: u64,
    /// The downlink rate the times are for (`downlink-mbps`).
    pub downlink_mbps: f64,
    /// Seconds to send every tile at that rate.
    pub downlink_s: f64,
    /// Seconds to send the kept tiles.
    pub kept_downlink_s: f64,
    /// The stage's own time per frame, ms.
    pub ms_per_frame: f64,
}

impl SectionKind for TilesSection {
    const KIND: &'static str = "tiles";
}

impl fmt::Display for TilesSection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
        let pct = |a: u64, b: u64| 100.0 * a as f64 / b.max(1) as f64;
        write!(
            f,
            "tilestats ({}): {} of {} tiles kept ({:.1}%), {:.1} of {:.1} MiB ({:.1}%); downlink at {} Mbps: {:.1} s -> {:.1} s; {:.2} ms per frame over {} frame{}",
            self.backend,
            self.kept,
            self.tiles,
            pct(self.kept, self.tiles),
            mib(self.kept_bytes),
            mib(self.bytes),
            pct(self.kept_bytes, self.bytes),
            self.downlink_mbps,
            self.downlink_s,
            self.kept_downlink_s,
            self.ms_per_frame,
            self.frames,
            if self.frames == 1 { "" } else { "s" }
        )
    }
}

impl TileFilter {
    /// The report's section: tiles and bytes kept, the downlink time before and after, time
    /// per frame.
    pub(crate) fn report_section(&self) -> TilesSection {
        let t = &self.totals;
        let secs = |b: u64| b as f64 * 8.0 / (self.config.downlink_mbps * 1e6);
        TilesSection {
            backend: self.sums.name().to_string(),
            frames: t.frames,
            tiles: t.tiles,
            kept: t.kept,
            bytes: t.bytes,
            kept_bytes: t.kept_bytes,
            downlink_mbps: self.config.downlink_mbps,
            downlink_s: secs(t.bytes),
            kept_downlink_s: secs(t.kept_bytes),
            ms_per_frame: t.time.as_secs_f64() * 1e3 / t.frames.max(1) as f64,
        }
    }
}
