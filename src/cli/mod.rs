//! The `octopipe` command line's parts: arguments, the commands, the report, signals, logging.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::Parser;

#[cfg(feature = "bench")]
use octopipe_tools::bench::ProbeOptions;

mod args;
#[cfg(feature = "bench")]
mod bench;
#[cfg(feature = "bench")]
mod bench_args;
mod log;
mod report;
mod run;
mod signals;

use args::{Cli, Command};
#[cfg(feature = "bench")]
use run::data_dir;
use run::{inspect, run};

/// Parse the command line and run its command.
/// An error as the one line the command prints: its message, then each cause in its `source()`
/// chain whose words the line does not hold already (a layer's message names its cause's words
/// and keeps the typed cause as its source; anyhow's context adds lines that do not).
/// A run's error names what a client gave (a stream's location): its control characters are
/// escaped, so that a newline in it cannot forge a line; a description's error keeps the lines
/// of its excerpt (the description is the user's own).
pub(crate) fn error_line(e: &anyhow::Error) -> String {
    let describe = e.chain().any(|c| {
        c.downcast_ref::<octopipe::describe::DescribeError>()
            .is_some()
    });
    let mut line = String::new();
    for cause in e.chain() {
        let words = match describe {
            true => cause.to_string(),
            false => octopipe::redact::controls(&cause.to_string()).into_owned(),
        };
        if line.is_empty() {
            line = words;
        } else if !line.contains(&words) {
            line = format!("{line}: {words}");
        }
    }
    line
}

/// Sets how threads wait on the GPUs before anything opens one; without a GPU there is nothing
/// to set (said in one line when a way other than CUDA's own was asked for).
fn host_wait(wait: octopipe::cuda::HostWait) -> Result<()> {
    if wait == octopipe::cuda::HostWait::Auto {
        return Ok(());
    }
    match octopipe::cuda::set_host_wait(wait) {
        Ok(gpus) => tracing::info!("--cuda-wait {wait}: set on {gpus} GPU(s)"),
        Err(octopipe::cuda::CudaError::NoGpu(e)) => {
            eprintln!("octopipe: --cuda-wait {wait} has nothing to set: {e}")
        }
        Err(e) => bail!("--cuda-wait {wait}: {e}"),
    }
    Ok(())
}

pub(crate) fn real_main() -> Result<ExitCode> {
    signals::ignore_file_size_signal();
    let cli = Cli::parse();
    log::init(cli.verbose);
    host_wait(cli.cuda_wait)?;
    match cli.command {
        Command::Run {
            pipeline,
            vars,
            budget_ms,
            force,
            observe,
        } => run(&pipeline, &vars, (budget_ms, force, cli.verbose), &observe),
        Command::Inspect { stage } => {
            print!("{}", inspect(stage.as_deref())?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Scene {
            out,
            force,
            size,
            seed,
        } => {
            if size == 0 {
                bail!("--size must be at least 1");
            }
            octopipe::tiles::scene::write_png(&out, size, size, seed, force)?;
            eprintln!(
                "octopipe: wrote {} ({size}x{size}, 16-bit grey, seed {seed})",
                out.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Pan {
            out,
            image,
            annotations,
            frames,
            force,
        } => {
            let data = std::env::var_os("OCTOPIPE_DATA").map(PathBuf::from);
            let mut opts = match (image, annotations, data) {
                (Some(image), Some(annotations), _) => octopipe_tools::pan::PanOptions {
                    image,
                    annotations,
                    ..octopipe_tools::pan::PanOptions::shared(std::path::Path::new(""), &out)
                },
                (_, _, Some(data)) => octopipe_tools::pan::PanOptions::shared(&data, &out),
                _ => bail!("the source image is needed: --image FILE --annotations FILE, or $OCTOPIPE_DATA (. scripts/env.sh)"),
            };
            (opts.frames, opts.overwrite) = (frames, force);
            let made = octopipe_tools::pan::make(&opts)?;
            eprintln!(
                "octopipe: wrote {} ({} frames of {}x{} at {} fps, panning over {}) and {} ({} objects, {} rows)",
                made.video.display(),
                made.frames,
                opts.size.0,
                opts.size.1,
                octopipe_tools::pan::FPS,
                opts.image.display(),
                made.truth.display(),
                made.objects,
                made.rows
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Eval { what } => {
            print!("{}", what.run()?);
            Ok(ExitCode::SUCCESS)
        }
        #[cfg(not(feature = "bench"))]
        Command::NoBench { .. } => bail!(
            "`octopipe bench` and `octopipe probe` are in builds with the `bench` feature: cargo build --release --features bench (scoring a run's output is `octopipe eval`)"
        ),
        #[cfg(feature = "bench")]
        Command::Bench { what } => {
            // Its tables are out: end the process as `run` does, without the C exit handlers
            // tearing down ONNX Runtime's CUDA provider and the driver while their threads
            // wind down (2 of 10 `bench pipeline` processes with CUDA graphs crashed after
            // printing their results; BENCHMARKS.md).
            let code = match bench::bench_command(what) {
                Ok(_) => 0,
                Err(e) => {
                    eprintln!("octopipe: error: {}", error_line(&e));
                    1
                }
            };
            use std::io::Write;
            let _ = std::io::stdout().flush();
            report::exit_now(code)
        }
        #[cfg(feature = "bench")]
        Command::Probe { data } => {
            print!(
                "{}",
                octopipe_tools::bench::probe(&ProbeOptions {
                    data_dir: data.or_else(data_dir)
                })?
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::error_line;

    #[test]
    fn the_error_line_names_each_cause_once() {
        // A sink's error names its cause's words and keeps the cause as its source.
        let missing = std::path::Path::new("/nonexistent/octopipe/out.jsonl");
        let sink = octopipe::sink::output::create_file(missing, false).unwrap_err();
        let e = anyhow::Error::from(octopipe::Error::from(sink)).context("jsonl");
        assert_eq!(
            error_line(&e),
            "jsonl: /nonexistent/octopipe/out.jsonl: cannot create: No such file or directory (os error 2)"
        );
    }
}
