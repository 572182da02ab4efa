//! Signals: SIGINT and SIGTERM during a run, and SIGXFSZ ignored.

use std::time::Duration;

use super::args::ReportFormat;
use super::report::{exit_now, print_report_within};

/// SIGINT and SIGTERM during a run: the first is acknowledged at once and stops the run (it
/// ends within the stop grace, the report printed); the second prints the report so far and
/// exits at once. Either way the exit status is 128 + the signal (130 SIGINT, 143 SIGTERM).
pub(crate) struct Signals {
    /// The first signal received, 0 while none.
    got: std::sync::Arc<std::sync::atomic::AtomicI32>,
    /// Whether the report was printed (by the main thread or on a second signal).
    reported: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Signals {
    pub(crate) fn install(stop: octopipe::pipeline::StopHandle, format: ReportFormat) -> Signals {
        use signal_hook::consts::{SIGINT, SIGTERM};
        use std::sync::atomic::Ordering;
        let signals = Signals {
            got: Default::default(),
            reported: Default::default(),
        };
        let (got, reported) = (signals.got.clone(), signals.reported.clone());
        match signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) {
            Ok(mut incoming) => {
                std::thread::spawn(move || {
                    for sig in incoming.forever() {
                        let name = signal_name(sig);
                        if got.swap(sig, Ordering::SeqCst) == 0 {
                            eprintln!("octopipe: {name}: stopping (again to exit now)");
                            stop.stop();
                            continue;
                        }
                        eprintln!("octopipe: second {name}: exiting now");
                        if !reported.swap(true, Ordering::SeqCst) {
                            print_report_within(stop.report(), format, Duration::from_secs(1));
                        }
                        exit_now(128 + sig);
                    }
                });
            }
            Err(e) => eprintln!("octopipe: warning: cannot handle SIGINT/SIGTERM: {e}"),
        }
        signals
    }

    /// Whether the caller is to print the report (false once a second signal printed it).
    pub(crate) fn take_report(&self) -> bool {
        !self
            .reported
            .swap(true, std::sync::atomic::Ordering::SeqCst)
    }

    /// 128 + the first signal received, if any.
    pub(crate) fn exit_code(&self) -> Option<i32> {
        let sig = self.got.load(std::sync::atomic::Ordering::SeqCst);
        (sig != 0).then_some(128 + sig)
    }
}

pub(crate) fn signal_name(sig: i32) -> &'static str {
    if sig == signal_hook::consts::SIGINT {
        "SIGINT"
    } else {
        "SIGTERM"
    }
}

/// A write past the file-size limit (`ulimit -f`) fails with an error the sinks report (after
/// cutting their output back to its last complete line), instead of SIGXFSZ killing the process
/// with no report. Set first thing: GStreamer may write its registry cache while it starts.
pub(crate) fn ignore_file_size_signal() {
    // SAFETY: setting a signal's disposition to SIG_IGN installs no handler code; it is
    // process-wide and done once, before any other thread starts.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}
