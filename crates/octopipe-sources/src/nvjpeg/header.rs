//! What a JPEG file's frame header says, read before any decoding: its size (checked before
//! memory is taken for it), and whether nvJPEG's batched decoder takes it (baseline, 8-bit,
//! three components sampled 4:2:0, as VisDrone and most cameras write) or it goes to the CPU.

use std::fmt;

use crate::header::jpeg_frame;

/// The frame header (SOFn segment) of a JPEG file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct JpegHeader {
    /// The SOF marker's second byte: 0xC0 baseline, 0xC1 extended, 0xC2 progressive...
    pub sof: u8,
    /// Bits per sample.
    pub precision: u8,
    /// Picture width in pixels.
    pub width: u32,
    /// Picture height in pixels.
    pub height: u32,
    /// Components (1 grey, 3 YCbCr, 4 CMYK/YCCK).
    pub components: u8,
    /// Sampling factors of the first three components, `(h, v)`.
    pub sampling: [(u8, u8); 3],
}

/// Why an image is decoded on the CPU instead of by nvJPEG.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum CpuReason {
    /// No frame header could be read: not a JPEG, or cut before its header.
    NoHeader,
    /// Progressive (or another non-baseline process) JPEG.
    NotBaseline,
    /// Not three 8-bit components (grey, CMYK, 12-bit).
    Components,
    /// Chroma not sampled 4:2:0.
    Sampling,
    /// nvJPEG refused or failed to decode it (a damaged file).
    Refused,
}

impl fmt::Display for CpuReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CpuReason::NoHeader => "no JPEG frame header",
            CpuReason::NotBaseline => "not a baseline JPEG (progressive or lossless)",
            CpuReason::Components => "not 3 components of 8 bits (grey, CMYK or 12-bit)",
            CpuReason::Sampling => "chroma not sampled 4:2:0",
            CpuReason::Refused => "nvJPEG could not decode it",
        })
    }
}

impl JpegHeader {
    /// Read the frame header of `bytes` ([`jpeg_frame`]); `None` when there is none before the
    /// data ends, or the bytes end inside it.
    pub(crate) fn read(bytes: &[u8]) -> Option<JpegHeader> {
        if bytes.get(..2)? != [0xFF, 0xD8] {
            return None;
        }
        let frame = jpeg_frame(bytes)?;
        let s = frame.segment;
        if s.len() + 2 < frame.len {
            return None;
        }
        let components = *s.get(5)?;
        let mut sampling = [(0, 0); 3];
        for (i, slot) in sampling
            .iter_mut()
            .enumerate()
            .take(components.min(3) as usize)
        {
            let f = *s.get(6 + 3 * i + 1)?;
            *slot = (f >> 4, f & 0x0F);
        }
        Some(JpegHeader {
            sof: frame.marker,
            precision: s[0],
            height: u16::from_be_bytes([s[1], s[2]]) as u32,
            width: u16::from_be_bytes([s[3], s[4]]) as u32,
            components,
            sampling,
        })
    }

    /// Whether nvJPEG's batched decoder takes this picture into I420 planes; the reason it goes
    /// to the CPU otherwise.
    pub(crate) fn gpu_decodable(&self) -> Result<(), CpuReason> {
        if self.sof != 0xC0 {
            return Err(CpuReason::NotBaseline);
        }
        if self.components != 3 || self.precision != 8 {
            return Err(CpuReason::Components);
        }
        if self.sampling != [(2, 2), (1, 1), (1, 1)] {
            return Err(CpuReason::Sampling);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A JPEG's first bytes: SOI, an APP0 segment, then a frame header of `sof` with
    /// `components` sampled as `sampling`.
    fn jpeg(sof: u8, width: u16, height: u16, sampling: &[u8]) -> Vec<u8> {
        let mut b = vec![0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, b'J', b'F'];
        let len = 8 + 3 * sampling.len() as u16;
        b.extend([0xFF, sof]);
        b.extend(len.to_be_bytes());
        b.push(8);
        b.extend(height.to_be_bytes());
        b.extend(width.to_be_bytes());
        b.push(sampling.len() as u8);
        for (i, s) in sampling.iter().enumerate() {
            b.extend([i as u8 + 1, *s, 0]);
        }
        b.extend([0xFF, 0xDA]);
        b
    }

    #[test]
    fn reads_size_and_sampling_and_says_what_the_gpu_takes() {
        let h = JpegHeader::read(&jpeg(0xC0, 2000, 1500, &[0x22, 0x11, 0x11])).unwrap();
        assert_eq!((h.width, h.height, h.components), (2000, 1500, 3));
        assert_eq!(h.gpu_decodable(), Ok(()));
        let progressive = JpegHeader::read(&jpeg(0xC2, 64, 64, &[0x22, 0x11, 0x11])).unwrap();
        assert_eq!(progressive.gpu_decodable(), Err(CpuReason::NotBaseline));
        let cmyk = JpegHeader::read(&jpeg(0xC0, 64, 64, &[0x11; 4])).unwrap();
        assert_eq!(cmyk.gpu_decodable(), Err(CpuReason::Components));
        let s444 = JpegHeader::read(&jpeg(0xC0, 64, 64, &[0x11, 0x11, 0x11])).unwrap();
        assert_eq!(s444.gpu_decodable(), Err(CpuReason::Sampling));
    }

    #[test]
    fn no_header_in_what_is_not_a_whole_jpeg_header() {
        let whole = jpeg(0xC0, 64, 64, &[0x22, 0x11, 0x11]);
        for cut in 0..whole.len() - 2 {
            // Cut inside the frame header: nothing read, no panic.
            if cut < 10 + 8 + 9 {
                assert_eq!(JpegHeader::read(&whole[..cut]), None, "cut at {cut}");
            }
        }
        assert_eq!(JpegHeader::read(b"\x89PNG\r\n\x1a\n"), None);
        assert_eq!(JpegHeader::read(&[0xFF, 0xD8, 0xFF, 0xDA, 0, 2]), None);
    }
}
