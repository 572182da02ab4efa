//! A baseline JPEG's entropy-coded data decoded as far as libjpeg's own checks go: each scan's
//! Huffman codes read block by block (no dequantization, no transform), so that data that does
//! not decode to exactly the blocks the frame holds is damage. That is what libjpeg reports as
//! a corrupt-data warning (`premature end of data segment`, `extraneous bytes before marker`,
//! `bad Huffman code`) and GStreamer's `jpegdec` drops: a file whose inside was overwritten (64
//! KiB of zeros) has every marker in place and decodes without a word, smeared or green.
//!
//! Progressive, lossless and arithmetic-coded files are not decoded here (their structure is
//! still checked).

/// What the markers before a scan said, as far as the decoding needs it.
#[derive(Default)]
pub(super) struct Tables {
    /// Huffman tables: DC 0..3, AC 0..3.
    dc: [Option<Huffman>; 4],
    ac: [Option<Huffman>; 4],
    /// The frame of a baseline (or extended sequential, Huffman) file; `None` for any other.
    frame: Option<Frame>,
    /// Another kind of frame was seen: nothing is decoded.
    other: bool,
    /// MCUs between restart markers (0: none).
    restart: usize,
}

struct Frame {
    width: usize,
    height: usize,
    /// (id, horizontal, vertical sampling).
    components: Vec<(u8, usize, usize)>,
}

/// A canonical Huffman table: an 8-bit lookup for short codes, the largest code of each length
/// for the others.
struct Huffman {
    /// For each 8-bit prefix: (code length, symbol), length 0 when the code is longer.
    fast: Vec<(u8, u8)>,
    /// Per length 1..=16: the largest code (-1 when none), and where its symbols start.
    max: [i32; 17],
    offset: [i32; 17],
    symbols: Vec<u8>,
}

impl Huffman {
    fn new(counts: &[u8; 16], symbols: &[u8]) -> Option<Huffman> {
        let mut max = [-1i32; 17];
        let mut offset = [0i32; 17];
        let mut fast = vec![(0u8, 0u8); 256];
        let (mut code, mut k) = (0i32, 0usize);
        for len in 1..=16 {
            let n = usize::from(counts[len - 1]);
            offset[len] = k as i32 - code;
            for _ in 0..n {
                let symbol = *symbols.get(k)?;
                if len <= 8 {
                    let shift = 8 - len;
                    let first = (code as usize) << shift;
                    for entry in fast.iter_mut().skip(first).take(1 << shift) {
                        *entry = (len as u8, symbol);
                    }
                }
                code += 1;
                k += 1;
            }
            if n > 0 {
                max[len] = code - 1;
            }
            // A code of a length must fit that length.
            if code > (1 << len) {
                return None;
            }
            code <<= 1;
        }
        Some(Huffman {
            fast,
            max,
            offset,
            symbols: symbols[..k].to_vec(),
        })
    }
}

impl Tables {
    /// Read a DHT segment's payload.
    pub(super) fn define_huffman(&mut self, mut p: &[u8]) {
        while p.len() >= 17 {
            let (class, id) = (p[0] >> 4, usize::from(p[0] & 0x0F));
            let mut counts = [0u8; 16];
            counts.copy_from_slice(&p[1..17]);
            let n: usize = counts.iter().map(|&c| usize::from(c)).sum();
            let Some(symbols) = p.get(17..17 + n) else {
                return;
            };
            let table = Huffman::new(&counts, symbols);
            match (class, id) {
                (0, 0..=3) => self.dc[id] = table,
                (1, 0..=3) => self.ac[id] = table,
                _ => {}
            }
            p = &p[17 + n..];
        }
    }

    /// Read a start-of-frame segment of `marker`.
    pub(super) fn start_frame(&mut self, marker: u8, p: &[u8]) {
        if !matches!(marker, 0xC0 | 0xC1) {
            self.other = true;
            return;
        }
        let Some(head) = p.get(..6) else {
            return;
        };
        let height = usize::from(u16::from_be_bytes([head[1], head[2]]));
        let width = usize::from(u16::from_be_bytes([head[3], head[4]]));
        let n = usize::from(head[5]);
        let components = (0..n)
            .filter_map(|i| {
                let c = p.get(6 + 3 * i..9 + 3 * i)?;
                let (h, v) = (usize::from(c[1] >> 4), usize::from(c[1] & 0x0F));
                Some((c[0], h, v))
            })
            .collect::<Vec<_>>();
        let sane = components.len() == n
            && components
                .iter()
                .all(|&(_, h, v)| (1..=4).contains(&h) && (1..=4).contains(&v));
        self.frame = (sane && width > 0 && height > 0).then_some(Frame {
            width,
            height,
            components,
        });
    }

    /// Read a DRI segment.
    pub(super) fn restart_interval(&mut self, p: &[u8]) {
        if let Some(r) = p.get(..2) {
            self.restart = usize::from(u16::from_be_bytes([r[0], r[1]]));
        }
    }

    /// Decode the scan whose header is `header` (the SOS payload) and whose entropy-coded data
    /// is `data` (up to the marker after it, restart markers included): what is wrong with it,
    /// if anything. A scan this cannot decode (no frame, a table not defined) is not judged.
    pub(super) fn scan(&self, header: &[u8], data: &[u8], at: usize) -> Option<String> {
        if self.other {
            return None;
        }
        let frame = self.frame.as_ref()?;
        let ns = usize::from(*header.first()?);
        let mut comps = Vec::with_capacity(ns);
        for i in 0..ns {
            let c = header.get(1 + 2 * i..3 + 2 * i)?;
            let &(_, h, v) = frame.components.iter().find(|f| f.0 == c[0])?;
            let dc = self.dc.get(usize::from(c[1] >> 4))?.as_ref()?;
            let ac = self.ac.get(usize::from(c[1] & 0x0F))?.as_ref()?;
            comps.push((h, v, dc, ac));
        }
        let hmax = frame.components.iter().map(|c| c.1).max()?;
        let vmax = frame.components.iter().map(|c| c.2).max()?;
        // The MCUs of the scan and the blocks (DC, AC tables) of each.
        let (mcus, blocks): (usize, Vec<(&Huffman, &Huffman)>) = match comps.as_slice() {
            [(h, v, dc, ac)] => {
                let w = (frame.width * h).div_ceil(hmax).div_ceil(8);
                let hgt = (frame.height * v).div_ceil(vmax).div_ceil(8);
                (w * hgt, vec![(*dc, *ac)])
            }
            _ => {
                let w = frame.width.div_ceil(8 * hmax);
                let hgt = frame.height.div_ceil(8 * vmax);
                let blocks = comps
                    .iter()
                    .flat_map(|&(h, v, dc, ac)| std::iter::repeat_n((dc, ac), h * v))
                    .collect();
                (w * hgt, blocks)
            }
        };
        let intervals = split_at_restarts(data);
        let per = match self.restart {
            0 => mcus,
            r => r,
        };
        let due = mcus.div_ceil(per.max(1)).max(1);
        if intervals.len() != due {
            return Some(format!(
                "corrupt JPEG data: the scan at byte {at} has {} restart intervals where {due} were due",
                intervals.len()
            ));
        }
        let mut done = 0;
        for (k, interval) in intervals.iter().enumerate() {
            let n = per.min(mcus - done);
            let mut bits = Bits::new(interval);
            for m in 0..n {
                for &(dc, ac) in &blocks {
                    if let Err(why) = block(&mut bits, dc, ac) {
                        return Some(format!(
                            "corrupt JPEG data: {why} in block {} of {mcus} of the scan at byte {at} (libjpeg: {})",
                            done + m + 1,
                            match why {
                                Bad::End => "premature end of data segment",
                                Bad::Code => "bad Huffman code",
                            }
                        ));
                    }
                }
            }
            done += n;
            if bits.extraneous() {
                return Some(format!(
                    "corrupt JPEG data: bytes left over after the last block of restart interval {} of the scan at byte {at} (libjpeg: extraneous bytes before marker)",
                    k + 1
                ));
            }
        }
        None
    }
}

/// The pieces of `data` between its restart markers.
fn split_at_restarts(data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i + 1 < data.len() {
        if data[i] == 0xFF && (0xD0..=0xD7).contains(&data[i + 1]) {
            out.push(&data[start..i]);
            i += 2;
            start = i;
        } else {
            i += 1;
        }
    }
    out.push(&data[start..]);
    out
}

/// Why a block did not decode.
#[derive(Debug, Clone, Copy)]
enum Bad {
    /// The data ran out.
    End,
    /// Bits that are no code of the table.
    Code,
}

impl std::fmt::Display for Bad {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Bad::End => "the data ends before the last block",
            Bad::Code => "bits that are no Huffman code",
        })
    }
}

/// One 8x8 block's codes: its DC difference, then its AC coefficients up to the end of block.
fn block(bits: &mut Bits, dc: &Huffman, ac: &Huffman) -> Result<(), Bad> {
    let s = bits.decode(dc)?;
    bits.skip(u32::from(s & 0x0F))?;
    let mut k = 1;
    while k < 64 {
        let rs = bits.decode(ac)?;
        let (r, s) = (usize::from(rs >> 4), u32::from(rs & 0x0F));
        if s == 0 {
            if r != 15 {
                break;
            }
            k += 16;
            continue;
        }
        k += r + 1;
        bits.skip(s)?;
    }
    Ok(())
}

/// The bits of a piece of entropy-coded data (stuffed `FF 00` read as `FF`).
struct Bits<'a> {
    data: &'a [u8],
    pos: usize,
    acc: u64,
    n: u32,
}

impl<'a> Bits<'a> {
    fn new(data: &'a [u8]) -> Self {
        Bits {
            data,
            pos: 0,
            acc: 0,
            n: 0,
        }
    }

    fn fill(&mut self) {
        while self.n <= 56 && self.pos < self.data.len() {
            let b = self.data[self.pos];
            self.pos += 1;
            if b == 0xFF {
                match self.data.get(self.pos) {
                    Some(0x00) => self.pos += 1,
                    // Fill bytes before the marker that ends the data.
                    _ => {
                        self.pos = self.data.len();
                        break;
                    }
                }
            }
            self.acc |= u64::from(b) << (56 - self.n);
            self.n += 8;
        }
    }

    fn skip(&mut self, k: u32) -> Result<(), Bad> {
        if k == 0 {
            return Ok(());
        }
        if self.n < k {
            self.fill();
            if self.n < k {
                return Err(Bad::End);
            }
        }
        self.acc <<= k;
        self.n -= k;
        Ok(())
    }

    fn decode(&mut self, t: &Huffman) -> Result<u8, Bad> {
        if self.n < 16 {
            self.fill();
        }
        let (len, symbol) = t.fast[(self.acc >> 56) as usize];
        if len > 0 && u32::from(len) <= self.n {
            self.acc <<= len;
            self.n -= u32::from(len);
            return Ok(symbol);
        }
        let mut code = 0i32;
        for len in 1..=16u32 {
            if len > self.n {
                return Err(Bad::End);
            }
            code = (code << 1) | ((self.acc >> (63 - (len - 1))) & 1) as i32;
            if code <= t.max[len as usize] {
                self.acc <<= len;
                self.n -= len;
                let i = (t.offset[len as usize] + code) as usize;
                return t.symbols.get(i).copied().ok_or(Bad::Code);
            }
        }
        Err(Bad::Code)
    }

    /// Whether a whole byte or more is left (a block's end pads its last byte only).
    fn extraneous(&mut self) -> bool {
        self.fill();
        self.n >= 8
    }
}
