//! Numbering a stream's frames by presentation time, so that a frame the decoder lost (a damaged
//! file, a lost packet: the decoder skips or conceals it) leaves a gap in the numbers instead of
//! giving its number, and its boxes, to the frames after it.

use std::time::Duration;

/// Where frame 0 of a stream lies on its timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// At time zero: a file's frames start there, so frames lost at the very start show too.
    Zero,
    /// At the first frame seen: a live stream's timestamps start wherever its clock stood.
    FirstFrame,
}

/// Gives each frame of a stream its position: `round((t - origin) / interval)` when the frame's
/// time and the stream's frame interval are known, else the next position. Positions only grow:
/// a frame stamped at or before the previous one takes the next position.
#[derive(Debug, Clone)]
pub struct Timeline {
    origin: Origin,
    start: Option<Duration>,
    /// The position of the frame at `start`.
    base: u64,
    next: u64,
}

impl Timeline {
    /// A timeline whose frame 0 lies at `origin`.
    pub fn new(origin: Origin) -> Self {
        Timeline {
            origin,
            start: None,
            base: 0,
            next: 0,
        }
    }

    /// A new clock from here on (a live sender that restarted): with [`Origin::FirstFrame`], the
    /// next frame takes the next position and later ones are placed from it.
    pub(crate) fn restart(&mut self) {
        if self.origin == Origin::FirstFrame {
            self.start = None;
            self.base = self.next;
        }
    }

    /// A splice (the picture changed mid-stream: an encoder that restarted, or files joined):
    /// timestamps on either side of it do not line up (MPEG-TS demuxers re-base them, leaving a
    /// gap), so, whatever the origin, the next frame takes the next position and later ones are
    /// placed from it.
    pub(crate) fn splice(&mut self) {
        self.origin = Origin::FirstFrame;
        self.start = None;
        self.base = self.next;
    }

    /// The position of a frame presented at `time` in a stream of nominal `interval`.
    pub fn place(&mut self, time: Option<Duration>, interval: Option<Duration>) -> u64 {
        let by_time = match (time, interval.filter(|iv| !iv.is_zero())) {
            (Some(t), Some(iv)) => {
                let start = match self.origin {
                    Origin::Zero => Duration::ZERO,
                    Origin::FirstFrame => *self.start.get_or_insert(t),
                };
                // Saturating float-to-int conversion: no overflow on absurd timestamps.
                let steps = (t.saturating_sub(start).as_secs_f64() / iv.as_secs_f64()).round();
                Some(self.base.saturating_add(steps as u64))
            }
            _ => None,
        };
        let position = by_time.map_or(self.next, |p| p.max(self.next));
        self.next = position.saturating_add(1);
        position
    }
}

/// A frame interval from a frame rate of `num/den` frames per second; `None` for a variable or
/// unknown rate (0/1, or nonsense).
pub fn interval_of(num: i32, den: i32) -> Option<Duration> {
    (num > 0 && den > 0).then(|| Duration::from_secs_f64(den as f64 / num as f64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: f64) -> Option<Duration> {
        Some(Duration::from_secs_f64(v / 1000.0))
    }

    #[test]
    fn gaps_in_time_leave_gaps_in_positions() {
        let iv = interval_of(30, 1);
        let mut t = Timeline::new(Origin::Zero);
        let got: Vec<u64> = [0.0, 33.3, 66.7, 133.3, 166.7]
            .iter()
            .map(|v| t.place(ms(*v), iv))
            .collect();
        assert_eq!(got, [0, 1, 2, 4, 5]);
    }

    #[test]
    fn a_file_that_starts_late_and_a_live_stream() {
        let iv = interval_of(25, 1);
        let mut file = Timeline::new(Origin::Zero);
        assert_eq!(file.place(ms(80.0), iv), 2);
        let mut live = Timeline::new(Origin::FirstFrame);
        assert_eq!(live.place(ms(1234.0), iv), 0);
        assert_eq!(live.place(ms(1314.0), iv), 2);
    }

    #[test]
    fn a_live_stream_that_restarts_numbers_on() {
        let iv = interval_of(30, 1);
        let mut live = Timeline::new(Origin::FirstFrame);
        assert_eq!(live.place(ms(5000.0), iv), 0);
        assert_eq!(live.place(ms(5066.7), iv), 2);
        live.restart();
        assert_eq!(live.place(ms(20.0), iv), 3);
        assert_eq!(live.place(ms(86.7), iv), 5);
        let mut file = Timeline::new(Origin::Zero);
        assert_eq!(file.place(ms(66.7), iv), 2);
        file.restart();
        assert_eq!(
            file.place(ms(100.0), iv),
            3,
            "a file's timeline has one origin"
        );
    }

    #[test]
    fn a_splice_numbers_on_from_the_next_frame() {
        let iv = interval_of(30, 1);
        let mut file = Timeline::new(Origin::Zero);
        assert_eq!(file.place(ms(0.0), iv), 0);
        assert_eq!(file.place(ms(33.3), iv), 1);
        // The demuxer re-based the second part a frame late.
        file.splice();
        assert_eq!(file.place(ms(100.0), iv), 2);
        assert_eq!(file.place(ms(133.3), iv), 3);
        assert_eq!(
            file.place(ms(200.0), iv),
            5,
            "a gap after the splice still shows"
        );
    }

    #[test]
    fn unknown_time_or_rate_and_going_back_count_on() {
        let mut t = Timeline::new(Origin::Zero);
        assert_eq!(t.place(None, interval_of(30, 1)), 0);
        assert_eq!(t.place(ms(500.0), None), 1);
        assert_eq!(t.place(ms(500.0), interval_of(0, 1)), 2);
        assert_eq!(t.place(ms(0.0), interval_of(30, 1)), 3);
        assert_eq!(t.place(Some(Duration::MAX), interval_of(30, 1)), u64::MAX);
        assert_eq!(t.place(ms(0.0), interval_of(30, 1)), u64::MAX);
    }
}
