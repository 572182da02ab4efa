//! The end-of-run report: where it goes and how it is written; the exit that follows.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;

use super::args::{ObserveArgs, ReportFormat};

/// The end-of-run report: a table on stderr, or one JSON object on stdout.
pub(crate) fn print_report(report: &octopipe::budget::Report, format: ReportFormat) {
    if format == ReportFormat::Json {
        match serde_json::to_value(report) {
            Ok(json) => println!("{json}"),
            Err(e) => eprintln!("octopipe: error: the report as JSON: {e}"),
        }
    } else {
        eprintln!("{report}");
    }
}

/// The report file could not be written (the report went to stderr instead).
#[derive(Debug, thiserror::Error)]
#[error("--report-file {}: write failed: {source}", path.display())]
pub(crate) struct ReportWriteError {
    /// The report file.
    path: PathBuf,
    /// The system's error.
    source: std::io::Error,
}

/// End the process with `code` at once, skipping the exit handlers. Nothing is flushed: stderr
/// is unbuffered, the report's JSON line went out with its newline, and stdout may belong to a
/// sink blocked on a reader that stopped reading.
pub(crate) fn exit_now(code: i32) -> ! {
    // SAFETY: _exit ends the process; nothing after it runs.
    unsafe { libc::_exit(code) }
}

/// Where the end-of-run report goes: `--report-file`, else a JSON report on stdout (on stderr
/// when stdout carries the JSONL), else the text table on stderr.
pub(crate) enum ReportTarget {
    File {
        path: PathBuf,
        file: std::fs::File,
        json: bool,
    },
    Stdout,
    Stderr {
        json: bool,
    },
}

impl ReportTarget {
    /// Create the report file now, as the run starts (a folder that does not exist fails
    /// before the run, not after it).
    pub(crate) fn open(
        args: &ObserveArgs,
        stdout_taken: bool,
        force: bool,
    ) -> Result<ReportTarget> {
        let json = args.report == ReportFormat::Json;
        Ok(match &args.report_file {
            Some(path) => ReportTarget::File {
                file: octopipe::sink::output::create_file(path, force).map_err(|e| {
                    anyhow::anyhow!("--report-file {}: {}", path.display(), e.reason)
                })?,
                path: path.clone(),
                json,
            },
            None if json && !stdout_taken => ReportTarget::Stdout,
            None => ReportTarget::Stderr { json },
        })
    }

    /// Whether the report goes to stderr as text (the table a person reads).
    pub(crate) fn is_text_on_stderr(&self) -> bool {
        matches!(self, ReportTarget::Stderr { json: false })
    }

    /// Write `report`; a report file that cannot be written is an error, and the report goes to
    /// stderr instead.
    pub(crate) fn write(
        &mut self,
        report: &octopipe::budget::Report,
    ) -> std::result::Result<(), ReportWriteError> {
        use std::io::Write;
        let text = |json: bool| {
            if json {
                serde_json::to_string(report).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
            } else {
                report.to_string()
            }
        };
        match self {
            ReportTarget::Stdout => println!("{}", text(true)),
            ReportTarget::Stderr { json } => eprintln!("{}", text(*json)),
            ReportTarget::File { path, file, json } => {
                if let Err(source) = writeln!(file, "{}", text(*json)).and_then(|_| file.flush()) {
                    eprintln!("{report}");
                    return Err(ReportWriteError {
                        path: path.clone(),
                        source,
                    });
                }
            }
        }
        Ok(())
    }
}

/// Print `report` from a thread of its own and wait at most `limit`: a reader that stopped
/// reading stdout must not keep the process from exiting.
pub(crate) fn print_report_within(
    report: octopipe::budget::Report,
    format: ReportFormat,
    limit: Duration,
) {
    let (done, wait) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        print_report(&report, format);
        let _ = done.send(());
    });
    let _ = wait.recv_timeout(limit);
}
