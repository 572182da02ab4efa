//! Entry points for the fuzz targets (`fuzz/`): the readers of what an image file or a server
//! hands a source, with the properties each must keep on any bytes. Built under `--cfg
//! fuzzing` (cargo-fuzz) and for the unit tests below, which check the same properties on
//! generated inputs in CI.

pub use crate::gst::relay_fuzzing::*;

use crate::header::{declared_size, scan_size, ImageFormat, SizeScan};

/// Every reader of an image file's bytes on `bytes`: the format's sniffing, the declared size,
/// the size read from each prefix as a decoder fed in chunks would, and the damage check.
/// Panics (the fuzzer's finding) where a property does not hold:
/// - a size read from a prefix is the size of the whole;
/// - a prefix that can never give a size says so only when the whole gives none;
/// - the damage check of a JPEG or PNG names something or nothing, without a panic.
pub fn image(bytes: &[u8]) {
    let whole = declared_size(bytes);
    let mut cuts: Vec<usize> = (0..bytes.len().min(48)).collect();
    cuts.extend([bytes.len() / 2, bytes.len()]);
    for cut in cuts {
        match scan_size(&bytes[..cut]) {
            SizeScan::Size(w, h) => assert_eq!(
                whole,
                Ok((w, h)),
                "the first {cut} bytes declare {w}x{h}, the whole file {whole:?}"
            ),
            SizeScan::Unreadable(why) => assert!(
                whole.is_err(),
                "the first {cut} bytes are unreadable ({why}), the whole file declares {whole:?}"
            ),
            SizeScan::NeedMore => {}
        }
    }
    if let Some(format) = ImageFormat::sniff(bytes) {
        let _ = crate::damage::image_damage(format.name(), bytes);
    }
    let _ = crate::damage::image_damage("JPEG", bytes);
    let _ = crate::damage::image_damage("PNG", bytes);
}

/// Every reader of what a server answers the relay on `data`. Panics where a property does not
/// hold:
/// - an RTSP message (or interleaved packet) whole in `data` lies within it, and is the same
///   message read on its own;
/// - a document of the HTTP servers `cam:80` and `[::1]:8080` rewritten for the relay names no
///   URI of the server any more;
/// - a chunked body decodes to no more bytes than its chunks;
/// - a host the relays take from `data` read as a URI is not empty and holds no `/`.
pub fn answer(data: &[u8]) {
    if let Ok(Some(n)) = rtsp_message(data) {
        assert!(n > 0 && n <= data.len(), "{n} of {}", data.len());
        assert_eq!(rtsp_message(&data[..n]), Ok(Some(n)));
    }
    for (host, port, server) in [
        ("cam", 80, "http://cam:80/"),
        ("::1", 8080, "http://[::1]:8080/"),
    ] {
        if let Ok(out) = http_document(data, host, port) {
            let text = String::from_utf8_lossy(&out);
            assert!(!text.contains(server), "{text}");
        }
    }
    if let Ok(body) = dechunk(data) {
        assert!(body.len() <= data.len());
    }
    if let Ok(uri) = std::str::from_utf8(data) {
        for (host, _) in relayed(uri) {
            assert!(!host.is_empty() && !host.contains('/'), "{uri}: {host}");
        }
    }
}

/// The fuzz targets' properties on generated inputs, so that CI keeps checking them: real
/// files (encoded here) and real answers, each mutated many times over.
#[cfg(test)]
mod tests {
    use super::*;
    use octopipe_core::rng::Rng;

    /// `seed` with 1 to 8 mutations: a byte changed (often to a marker's or a length's byte),
    /// bytes inserted or removed, the end cut, a run of bytes repeated.
    fn mutate(seed: &[u8], rng: &mut Rng) -> Vec<u8> {
        const SPECIAL: [u8; 10] = [0x00, 0xFF, 0xD8, 0xC0, 0xC4, 0xDA, 0xD9, 0xDD, 0x7F, 0x80];
        let mut v = seed.to_vec();
        for _ in 0..1 + rng.below(8) {
            let at = rng.below(v.len() + 1);
            match rng.below(6) {
                0 if at < v.len() => v[at] = SPECIAL[rng.below(SPECIAL.len())],
                1 if at < v.len() => v[at] = rng.next_u64() as u8,
                2 => v.insert(at, SPECIAL[rng.below(SPECIAL.len())]),
                3 if at < v.len() => {
                    v.remove(at);
                }
                4 => v.truncate(at),
                _ => {
                    let end = (at + rng.below(16)).min(v.len());
                    let run = v[at..end].to_vec();
                    v.splice(at..at, run);
                }
            }
        }
        v
    }

    fn encoded(format: image::ImageFormat, w: u32, h: u32) -> Vec<u8> {
        let pixels: Vec<u8> = (0..w * h * 3).map(|i| (i * 37 % 251) as u8).collect();
        let img = image::RgbImage::from_raw(w, h, pixels).unwrap();
        let mut out = std::io::Cursor::new(Vec::new());
        img.write_to(&mut out, format).unwrap();
        out.into_inner()
    }

    #[test]
    fn image_readers_keep_their_properties_on_mutated_files() {
        let mut seeds = vec![
            encoded(image::ImageFormat::Jpeg, 33, 17),
            encoded(image::ImageFormat::Png, 33, 17),
            // GIF, BMP (info and core headers), WebP (VP8X, VP8, VP8L): their headers.
            b"GIF89a\x21\x00\x11\x00\xf7\x00\x00".to_vec(),
            [
                &b"BM"[..],
                &[0; 12],
                &[40, 0, 0, 0, 33, 0, 0, 0, 0xEF, 0xFF, 0xFF, 0xFF],
            ]
            .concat(),
            [&b"BM"[..], &[0; 12], &[12, 0, 0, 0, 33, 0, 17, 0]].concat(),
            [
                &b"RIFF\x30\x00\x00\x00WEBPVP8X\x0a\x00\x00\x00"[..],
                &[0; 4],
                &[32, 0, 0, 16, 0, 0],
            ]
            .concat(),
            [
                &b"RIFF\x30\x00\x00\x00WEBPVP8 \x10\x00\x00\x00"[..],
                &[0; 3],
                &[0x9D, 0x01, 0x2A, 33, 0, 17, 0],
            ]
            .concat(),
            [
                &b"RIFF\x30\x00\x00\x00WEBPVP8L\x10\x00\x00\x00"[..],
                &[0x2F, 0x20, 0x40, 0x04, 0x00],
            ]
            .concat(),
        ];
        // A JPEG whose frame header comes after stray bytes and fill bytes (libjpeg skips them).
        let jpeg = seeds[0].clone();
        seeds.push([&jpeg[..2], b"xx\xFF\xFF", &jpeg[2..]].concat());
        for seed in &seeds {
            image(seed);
        }
        assert_eq!(declared_size(&seeds[0]), Ok((33, 17)));
        assert_eq!(declared_size(&seeds[1]), Ok((33, 17)));
        let mut rng = Rng::new(0x2545_F491_4F6C_DD1D);
        for i in 0..20_000 {
            let seed = &seeds[i % seeds.len()];
            image(&mutate(seed, &mut rng));
        }
    }

    #[test]
    fn relay_readers_keep_their_properties_on_mutated_answers() {
        let seeds: [&[u8]; 6] = [
            b"RTSP/1.0 200 OK\r\nCSeq: 2\r\nContent-Type: application/sdp\r\nContent-Length: 44\r\n\r\nv=0\r\nm=video 0 RTP/AVP 96\r\na=control:trackID=0\r\n",
            b"$\x00\x00\x04abcd$\x01\x00\x02xy",
            b"RTSP/1.0 302 Found\r\nCSeq: 3\r\nLocation: rtsp://u:p@10.0.0.9/x\r\n\r\n",
            b"#EXTM3U\n#EXT-X-KEY:METHOD=NONE,URI=\"http://cam/k\"\nhttp://cam:80/a.ts\nhttps://cam/b.ts\nc.ts\n",
            b"<MPD xmlns=\"http://www.w3.org/x\"><BaseURL>http://cam/v/</BaseURL></MPD>",
            b"3\r\nabc\r\n2;x\r\nde\r\n0\r\n\r\n",
        ];
        let mut rng = Rng::new(0x9E37_79B9_7F4A_7C15);
        for i in 0..20_000 {
            let seed = seeds[i % seeds.len()];
            let mut data = mutate(seed, &mut rng);
            // Characters of several bytes where the readers slice text.
            if i % 3 == 0 {
                let at = rng.below(data.len() + 1);
                let odd = ["é", "😀", "\u{80}", "://"][rng.below(4)];
                data.splice(at..at, odd.bytes());
            }
            answer(&data);
        }
    }
}
