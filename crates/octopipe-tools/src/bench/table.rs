//! The preprocess benchmark's table: one [`Row`] per implementation, rendered as Markdown.

use std::fmt::Write as _;

/// One table row.
#[derive(Debug, Clone, Default)]
pub struct Row {
    /// Workload name.
    pub workload: String,
    /// Implementation.
    pub name: String,
    /// Kernel median ms (GPU: 10 back-to-back launches / 10; CPU: one run).
    pub kernel_ms: Option<f64>,
    /// Metadata + metadata upload + kernel, frames already on the device, ms per batch.
    pub e2e_ms: Option<f64>,
    /// The same plus moving the frames' pixels to the device: the cheapest of whole frames,
    /// touched rows, crop rectangles gathered on the host, and crop rectangles gathered by the GPU
    /// from the pinned frames, ms.
    pub e2e_upload_ms: Option<f64>,
    /// The same plus the copy of the output back to pinned host memory, ms.
    pub e2e_back_ms: Option<f64>,
    /// Bytes the kernel moves: output written + crop pixels read + metadata.
    pub bytes: Option<u64>,
    /// Metadata bytes.
    pub meta_bytes: Option<u64>,
    /// Achieved GB/s on the bytes written.
    pub gbps: Option<f64>,
    /// Share of the measured device-to-device copy bandwidth.
    pub of_copy: Option<f64>,
    /// Largest difference from the CPU backend on the 0..255 scale.
    pub max_diff: Option<f32>,
    /// Free-form remark.
    pub note: String,
}

fn opt(v: Option<f64>, prec: usize) -> String {
    v.map(|x| format!("{x:.prec$}"))
        .unwrap_or_else(|| "-".into())
}

/// Render rows as one Markdown table.
pub fn format_table(header: &str, rows: &[Row]) -> String {
    let mut s = String::new();
    s.push_str(header);
    s.push_str("| workload | impl | kernel ms (queued) | e2e ms (meta+upload meta+kernel) | +frame upload ms | +copy back ms | bytes moved | meta bytes | GB/s written | % of d2d copy | max abs diff vs cpu (0..255) | note |\n");
    s.push_str("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    for r in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.workload,
            r.name,
            opt(r.kernel_ms, 4),
            opt(r.e2e_ms, 4),
            opt(r.e2e_upload_ms, 4),
            opt(r.e2e_back_ms, 4),
            r.bytes.map(|b| b.to_string()).unwrap_or_else(|| "-".into()),
            r.meta_bytes
                .map(|b| b.to_string())
                .unwrap_or_else(|| "-".into()),
            opt(r.gbps, 1),
            r.of_copy
                .map(|x| format!("{:.0}%", x * 100.0))
                .unwrap_or_else(|| "-".into()),
            r.max_diff
                .map(|d| format!("{d:.3}"))
                .unwrap_or_else(|| "-".into()),
            r.note
        );
    }
    s
}
