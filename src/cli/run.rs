//! `octopipe run` and `octopipe inspect`.

use std::collections::HashMap;
#[cfg(feature = "bench")]
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use octopipe::describe;
use octopipe::observe;
use octopipe::pipeline::Pipeline;
use octopipe::preprocess::PreprocessConfig;
use octopipe::stage::Registry;
use octopipe::Builtin;

use super::args::{ObserveArgs, ProgressArg};
use super::report::{exit_now, ReportTarget};
use super::signals::{signal_name, Signals};

/// `$OCTOPIPE_DATA`, if set.
#[cfg(feature = "bench")]
pub(crate) fn data_dir() -> Option<PathBuf> {
    std::env::var_os("OCTOPIPE_DATA").map(PathBuf::from)
}

/// `octopipe run`: `(budget_ms, force, verbose)` are `--budget-ms`, `--force` and `-v`.
pub(crate) fn run(
    pipeline: &str,
    vars: &[String],
    (budget_ms, force, verbose): (Option<f64>, bool, bool),
    observe: &ObserveArgs,
) -> Result<ExitCode> {
    let vars = vars
        .iter()
        .map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .with_context(|| format!("--set {kv}: expected NAME=VALUE"))
        })
        .collect::<Result<HashMap<_, _>>>()?;
    let (origin, text) = describe::load(pipeline)
        .with_context(|| format!("cannot read pipeline file {pipeline}"))?;
    let desc = describe::parse_with_env(&origin, &text, &vars)?;
    let registry = Registry::builtin();
    let mut graph = match observe.streams {
        true => describe::build_open(&desc, &registry)?,
        false => describe::build_with(&desc, &registry)?,
    };
    if let Some(ms) = budget_ms {
        // A number past a Duration (1e300) is refused, not a panic.
        let budget = Duration::try_from_secs_f64(ms / 1000.0).ok();
        match budget.filter(|b| ms > 0.0 && ms <= 1e12 && !b.is_zero()) {
            Some(b) => graph.budget = b,
            None => bail!(
                "--budget-ms must be a positive number of milliseconds (at most 1e12), found {ms}"
            ),
        }
    }
    // Before anything opens: no output of ours may land on an input of the run, nor replace
    // earlier output unless --force, and no station takes streams where anyone may add them.
    graph.check_paths(&observe.outputs())?;
    octopipe::sink::output::check_new(&observe.outputs(), force)?;
    graph.overwrite = force;
    let control = observe.control.config()?;
    if let (true, Some(addr)) = (observe.streams, &observe.metrics_addr) {
        control.check_exposure(addr)?;
    }
    let mut report = ReportTarget::open(observe, graph.writes_stdout(), force)?;
    let mut pipeline = Pipeline::build(graph)?;
    let streams = match observe.streams {
        true => Some(pipeline.streams(&registry)?),
        false => None,
    };
    let metrics = add_observers(&mut pipeline, observe, control)?;
    if let (Some(metrics), Some(streams)) = (&metrics, streams) {
        metrics.serve_streams(streams)?;
    }
    let signals = Signals::install(pipeline.stop_handle(), observe.report);
    let outcome = pipeline.run();
    // A run that failed before any frame entered has nothing to report but its error: no table
    // of zeros (a JSON report or a report file still gets its `error`). What its sources went
    // through (gone quiet, reconnects) is still worth the table.
    let r = &outcome.report;
    let nothing = outcome.error.is_some()
        && r.frames_in == 0
        && r.lost == 0
        && r.streams
            .iter()
            .all(|s| s.events.iter().all(|(e, _)| e == "failed"));
    let report_error = if signals.take_report() && !(nothing && report.is_text_on_stderr()) {
        report.write(&outcome.report).err()
    } else {
        None
    };
    if let Some(e) = &report_error {
        eprintln!("octopipe: error: {e}");
    }
    // Each error once: its one line, and with -v GStreamer's detail after it.
    // It may name what a client gave (a location): one line, control characters escaped.
    let say = |e: &octopipe::Error| {
        eprintln!(
            "octopipe: error: {}",
            octopipe::redact::controls(&e.to_string())
        );
        let detail = e
            .downcast_ref::<octopipe::source::SourceError>()
            .and_then(|s| s.detail());
        if let (true, Some(detail)) = (verbose, detail) {
            let detail = octopipe::redact::controls(detail).into_owned();
            eprintln!("octopipe: GStreamer's detail: {detail}");
        }
    };
    // An output asked for and not written fails the run.
    for line in &outcome.report.not_written {
        eprintln!("octopipe: error: {line}");
    }
    let unwritten = !outcome.report.not_written.is_empty();
    let code = match signals.exit_code() {
        Some(code) => {
            if let Some(e) = &outcome.error {
                say(e);
            }
            eprintln!("octopipe: stopped by {}", signal_name(code - 128));
            code
        }
        None => match &outcome.error {
            Some(e) => {
                say(e);
                1
            }
            None if report_error.is_some() || unwritten => 1,
            None => 0,
        },
    };
    // The run is over, its outputs closed and its report written: end the process now, without
    // the C exit handlers. Stages still busy (a batch in a model, a sink blocked on its reader)
    // keep their threads, and libraries' own threads (GStreamer's, ONNX Runtime's, the CUDA
    // driver's) may still be winding down: exit handlers tearing libraries down under them
    // crashed two-GPU runs after their report (SIGSEGV in a library thread; BENCHMARKS.md).
    if outcome.abandoned.is_empty() {
        // (A sink blocked on its reader may be stuck in stdout: then nothing is flushed.)
        use std::io::Write;
        let _ = std::io::stdout().flush();
    }
    exit_now(code)
}

/// How often `--progress auto` writes its line when stderr is no terminal.
const LOG_PROGRESS: Duration = Duration::from_secs(10);

/// Attach the observers `args` asks for; the metrics server (if any) lives as long as the value
/// returned.
fn add_observers(
    pipeline: &mut Pipeline,
    args: &ObserveArgs,
    control: octopipe::control::ControlConfig,
) -> Result<Option<octopipe::control::ControlPlane>> {
    use std::io::IsTerminal;
    let every = Duration::from_secs(2);
    let style = match (args.progress, std::io::stderr().is_terminal()) {
        (ProgressArg::Off, _) => None,
        (ProgressArg::Bar, _) | (ProgressArg::Auto | ProgressArg::On, true) => {
            Some(observe::ProgressStyle::Bar)
        }
        // A log (a service's journal, a pipe) gets a line now and then, not every 2 s.
        (ProgressArg::Auto, false) => Some(observe::ProgressStyle::Log(LOG_PROGRESS)),
        (ProgressArg::Lines, _) | (ProgressArg::On, false) => {
            Some(observe::ProgressStyle::Lines(every))
        }
    };
    if let Some(style) = style {
        pipeline.observe(Box::new(observe::Progress::new(style)));
    }
    if let Some(path) = &args.plot {
        pipeline.observe(Box::new(observe::LatencyPlot::new(path)));
    }
    if let Some(path) = &args.annotate {
        let target = observe::AnnotateTarget::from_path(path);
        let interval = pipeline.frame_interval().unwrap_or(pipeline.budget());
        let annotator = observe::Annotator::new(target, interval)
            .with_context(|| format!("--annotate {}", path.display()))?;
        let live = pipeline.is_live();
        pipeline.keep_pixels(true);
        pipeline.observe(Box::new(annotator.skip_when_behind(live)));
    }
    if let Some(path) = &args.mosaic {
        let preprocess = pipeline
            .caps()
            .get::<PreprocessConfig>()
            .cloned()
            .unwrap_or_default();
        let mosaic = observe::Mosaic::new(path, preprocess, args.mosaic_crops, 2);
        pipeline.observe(Box::new(mosaic));
    }
    if args.energy {
        pipeline.observe(Box::new(observe::Energy::new()));
    }
    let metrics = match &args.metrics_addr {
        Some(addr) => {
            let server = octopipe::control::ControlPlane::start(addr, control)?;
            eprintln!("metrics: http://{}/metrics", server.local_addr());
            pipeline.observe(server.observer());
            Some(server)
        }
        None => None,
    };
    Ok(metrics)
}

/// `octopipe inspect`: wrapped to the terminal's width, or to [`octopipe::stage::INSPECT_WIDTH`]
/// when the output goes elsewhere.
pub(crate) fn inspect(stage: Option<&str>) -> Result<String> {
    let registry = Registry::builtin();
    let width = terminal_width().unwrap_or(octopipe::stage::INSPECT_WIDTH);
    registry.inspect_width(stage, width).with_context(|| {
        let hint = stage
            .and_then(|name| describe::closest(name, registry.names()))
            .map(|c| format!(" (did you mean '{c}'?)"))
            .unwrap_or_default();
        format!("unknown stage '{}'{hint}", stage.unwrap_or_default())
    })
}

/// The width of the terminal standard output writes to; `None` when it is no terminal.
fn terminal_width() -> Option<usize> {
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `winsize` through the pointer, which points at one.
    let ok = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) } == 0;
    (ok && size.ws_col > 0).then_some(usize::from(size.ws_col))
}
