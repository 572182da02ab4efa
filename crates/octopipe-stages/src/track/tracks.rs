//! The trackers of every stream ([`Tracks`]) and their report sections ([`TrackSection`]).

use std::collections::BTreeMap;

use super::config::{TrackConfig, TrackError};
use super::tracker::Tracker;
use octopipe_core::frame::Frame;

/// One tracker per stream, made as the stream's first frame comes.
#[derive(Debug, Clone)]
pub struct Tracks {
    pub(super) config: TrackConfig,
    pub(super) streams: BTreeMap<u32, Tracker>,
}

impl Tracks {
    /// Trackers with `config` (checked).
    pub fn new(config: TrackConfig) -> Result<Self, TrackError> {
        config.validate()?;
        Ok(Tracks {
            config,
            streams: BTreeMap::new(),
        })
    }

    /// Track `frame`'s boxes with its stream's tracker; a frame the detector skipped
    /// ([`Frame::predicted`]) gets the tracks' predicted boxes instead.
    pub fn update(&mut self, frame: &mut Frame) {
        let config = self.config;
        let tracker = self
            .streams
            .entry(frame.stream)
            .or_insert_with(|| Tracker::checked(config));
        if frame.predicted {
            frame.detections = tracker.predict(frame.seq, frame.layout.width, frame.layout.height);
        } else {
            tracker.update(frame.seq, &mut frame.detections);
        }
    }

    /// The tracker of `stream`, once a frame of it came.
    pub fn stream(&self, stream: u32) -> Option<&Tracker> {
        self.streams.get(&stream)
    }

    /// The report's sections: per stream, tracks born, ended and open, frames out of order;
    /// `high_from` says where the `high` threshold came from.
    pub fn sections(&self, high_from: HighFrom) -> Vec<TrackSection> {
        self.streams
            .iter()
            .map(|(stream, t)| TrackSection {
                stream: *stream,
                born: t.born(),
                ended: t.ended(),
                open: t.open(),
                unconfirmed: t.unconfirmed(),
                out_of_order: t.out_of_order(),
                min_hits: self.config.min_hits,
                high: self.config.high,
                low: self.config.low,
                high_from,
            })
            .collect()
    }

    /// Report lines: per stream, tracks born, ended and open; frames out of order if any.
    pub fn report_lines(&self) -> Vec<String> {
        let sections = self.sections(HighFrom::Track);
        sections.iter().map(|s| s.to_string()).collect()
    }
}

/// Where the `track` stage's `high` threshold came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum HighFrom {
    /// Given: `track high=...`.
    Track,
    /// The detector's `score` before it on its branch (high left out).
    DetectScore,
    /// `high`'s declared default: no detector before it, `high` left out.
    Default,
}

/// The report's section of one stream's tracks (JSON: `sections.track`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct TrackSection {
    /// The stream.
    pub stream: u32,
    /// Tracks confirmed (given an id).
    pub born: u64,
    /// Tracks that ended (unmatched for more than `max-age` frames).
    pub ended: u64,
    /// Tracks still open at the end of the run.
    pub open: u64,
    /// New tracks dropped before `min-hits` matched frames.
    pub unconfirmed: u64,
    /// Frames that came out of order (each taken as the next frame).
    pub out_of_order: u64,
    /// The `min-hits` setting.
    pub min_hits: u32,
    /// The score from which boxes start and first continue tracks.
    pub high: f32,
    /// The score under which boxes get no track.
    pub low: f32,
    /// Where `high` came from.
    pub high_from: HighFrom,
}

impl octopipe_core::budget::SectionKind for TrackSection {
    const KIND: &'static str = "track";
}

impl std::fmt::Display for TrackSection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "track: stream {}: {} tracks born, {} ended, {} open at the end",
            self.stream, self.born, self.ended, self.open
        )?;
        if self.unconfirmed > 0 {
            write!(
                f,
                " ({} new tracks dropped before min-hits={})",
                self.unconfirmed, self.min_hits
            )?;
        }
        if self.high_from == HighFrom::DetectScore {
            write!(f, "; high={} from the detector's score", self.high)?;
        }
        if self.out_of_order > 0 {
            write!(
                f,
                "\ntrack: stream {}: {} frames came out of order (each taken as the next frame)",
                self.stream, self.out_of_order
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::track::TrackConfig;
    use octopipe_core::frame::{Colorimetry, Detection, FrameLayout, PixelFormat, PooledBuf};

    fn frame(stream: u32, seq: u64, boxes: &[[u32; 4]]) -> Frame {
        let layout = FrameLayout::packed(PixelFormat::Rgb, 64, 48);
        let pixels = PooledBuf::unpooled(vec![0; layout.size()]);
        let mut f = Frame::new(stream, seq, "test", layout, Colorimetry::default(), pixels);
        f.detections = boxes.iter().map(|b| Detection::new(*b)).collect();
        f
    }

    #[test]
    fn streams_with_the_same_boxes_get_their_own_tracks() {
        let mut tracks = Tracks::new(TrackConfig {
            min_hits: 1,
            ..Default::default()
        })
        .unwrap();
        let boxes = |seq: u64| {
            [
                [10 + 5 * seq as u32, 10, 40, 40],
                [300, 200 + 3 * seq as u32, 30, 50],
            ]
        };
        // Interleaved as a shared batch stage sees them; stream 1 starts two frames late.
        for seq in 0..10u64 {
            for (stream, s) in [(0, Some(seq)), (1, seq.checked_sub(2))] {
                let Some(s) = s else { continue };
                let mut f = frame(stream, s, &boxes(s));
                tracks.update(&mut f);
                let ids: Vec<_> = f.detections.iter().map(|d| d.track).collect();
                assert_eq!(ids, [Some(1), Some(2)], "stream {stream} frame {s}");
            }
        }
        assert_eq!(
            tracks.report_lines(),
            [
                "track: stream 0: 2 tracks born, 0 ended, 2 open at the end",
                "track: stream 1: 2 tracks born, 0 ended, 2 open at the end"
            ]
        );
    }

    /// Typed sections (the budget's report, shown with the tracker's): their lines end the text report, their fields stand under
    /// `sections.KIND` in the JSON one, with the schema's version.
    #[test]
    fn sections_are_typed_in_json_and_lines_in_text() {
        let mut b =
            octopipe_core::budget::Budget::new(octopipe_core::budget::DEFAULT_BUDGET, Vec::new());
        let sections = Tracks::new(Default::default())
            .unwrap()
            .sections(HighFrom::Default);
        assert!(sections.is_empty());
        let track = TrackSection {
            stream: 0,
            born: 5,
            ended: 2,
            open: 3,
            unconfirmed: 0,
            out_of_order: 0,
            min_hits: 2,
            high: 0.3,
            low: 0.1,
            high_from: HighFrom::DetectScore,
        };
        b.add_section(&track);
        b.add_line("plot: written".into());
        let r = b.finish();
        let lines: Vec<&str> = r.lines().collect();
        assert_eq!(
            lines,
            [
                "track: stream 0: 5 tracks born, 2 ended, 3 open at the end; high=0.3 from the detector's score",
                "plot: written"
            ]
        );
        assert!(r.to_string().ends_with(&lines.join("\n")));
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["version"], octopipe_core::budget::REPORT_VERSION);
        assert_eq!(json["sections"]["track"][0]["born"], 5);
        assert_eq!(json["sections"]["track"][0]["high_from"], "detect-score");
        assert_eq!(json["extra"], serde_json::json!(["plot: written"]));
        assert_eq!(r.sections::<TrackSection>(), [track]);
    }
}
