//! ONNX Runtime, shared by the stages that run models (classify, detect).
//!
//! The library is loaded at run time from `ORT_DYLIB_PATH` (default `libonnxruntime.so`); one
//! environment is shared by the whole process. A session runs on the CPU execution provider or on
//! CUDA's ([`Ep`]): the CUDA one needs an ONNX Runtime build with it (pip `onnxruntime-gpu`) and
//! a GPU; `Ep::Auto` takes it when both are there and otherwise says why in one log line.

use std::path::Path;
use std::sync::OnceLock;

use ort::environment::Environment;
use ort::session::Session;

/// Environment variable naming the ONNX Runtime library.
pub const ORT_DYLIB_ENV: &str = "ORT_DYLIB_PATH";
/// Environment variable: when set, every session writes ONNX Runtime's profile (a Chrome trace
/// of each run and node) to a JSON file whose name starts with its value.
pub const ORT_PROFILE_ENV: &str = "OCTOPIPE_ORT_PROFILE";
/// The ONNX Runtime version octopipe is built against.
pub const ORT_VERSION: &str = "1.31.1";

/// ONNX Runtime or a model could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum OnnxError {
    /// The ONNX Runtime library could not be loaded.
    #[error("ONNX Runtime library {path}: {reason}\n  hint: pip install onnxruntime=={ORT_VERSION} and set {ORT_DYLIB_ENV} to its onnxruntime/capi/libonnxruntime.so.{ORT_VERSION} (scripts/setup.sh does both)")]
    Runtime {
        /// The library path tried.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// The model file could not be loaded.
    #[error("model {path}: {reason}")]
    Model {
        /// The model file.
        path: String,
        /// What went wrong.
        reason: String,
    },
}

/// A model's class names from a labels file: one per line, trimmed, blank lines skipped.
pub fn read_labels(path: &Path) -> std::io::Result<Vec<String>> {
    Ok(std::fs::read_to_string(path)?
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect())
}

/// The process-wide ONNX Runtime environment, loaded on first use.
pub fn environment() -> Result<&'static Environment, OnnxError> {
    static ENV: OnceLock<Result<Environment, (String, String)>> = OnceLock::new();
    let path = std::env::var(ORT_DYLIB_ENV).unwrap_or_else(|_| "libonnxruntime.so".into());
    ENV.get_or_init(|| {
        let fail = |e: &dyn std::fmt::Display| (path.clone(), e.to_string());
        ort::init_from(&path)
            .map_err(|e| fail(&e))?
            .with_name("octopipe")
            .build()
            .map_err(|e| fail(&e))
    })
    .as_ref()
    .map_err(|(path, reason)| OnnxError::Runtime {
        path: path.clone(),
        reason: reason.clone(),
    })
}

/// Which ONNX Runtime execution provider runs a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Ep {
    /// CUDA's when the ONNX Runtime build has it and a GPU is present, else the CPU's.
    #[default]
    Auto,
    /// The CPU execution provider.
    Cpu,
    /// CUDA's, on this device ordinal; an error when it cannot be had.
    Cuda(i32),
}

/// An ONNX Runtime session for the model at `model`, with `threads` intra-op threads (0: ONNX
/// Runtime's default), on `ep`. Returns whether it runs on CUDA.
pub fn session_on(model: &Path, threads: usize, ep: Ep) -> Result<(Session, bool), OnnxError> {
    let device = match ep {
        Ep::Cpu => return Ok((session(model, threads)?, false)),
        Ep::Cuda(d) => d,
        Ep::Auto => match crate::preprocess::cuda::available() {
            Ok(()) => 0,
            Err(why) => {
                tracing::info!("{}: ONNX Runtime on the CPU ({why})", model.display());
                return Ok((session(model, threads)?, false));
            }
        },
    };
    // Batches come in every size: an exhaustive cuDNN search would run anew for each new one.
    let cuda = ort::ep::CUDA::default()
        .with_device_id(device)
        .with_conv_algorithm_search(ort::ep::cuda::ConvAlgorithmSearch::Heuristic)
        .build()
        .error_on_failure();
    match build(model, threads, Some(cuda)) {
        Ok(s) => Ok((s, true)),
        Err(OnnxError::Model { reason, .. }) if ep == Ep::Auto => {
            tracing::info!("{}: ONNX Runtime on the CPU ({reason})", model.display());
            Ok((session(model, threads)?, false))
        }
        Err(e) => Err(e),
    }
}

/// The sessions of one model. On the CPU execution provider one session runs every batch size as
/// it comes. On CUDA's, a run whose batch size differs from the session's previous run makes
/// every convolution plan anew (measured: ~240 ms a run for the 64x64 classifier on an H100,
/// against 0.3-1.1 ms at a fixed size), so batches are padded to a power of two (at least
/// [`Sessions::MIN_ROWS`]) and each padded size has its own session, made on first use.
pub struct Sessions {
    model: std::path::PathBuf,
    threads: usize,
    /// The CUDA device, when the sessions run on CUDA's execution provider.
    cuda: Option<i32>,
    /// `(rows, session)`; the first is the one [`Sessions::open`] made (rows 0: not used yet).
    sessions: Vec<(usize, Session)>,
}

impl Sessions {
    /// The smallest padded batch on CUDA.
    pub const MIN_ROWS: usize = 8;

    /// Open the model on `ep` (see [`session_on`]).
    pub fn open(model: &Path, threads: usize, ep: Ep) -> Result<Self, OnnxError> {
        let (session, on_cuda) = session_on(model, threads, ep)?;
        let cuda = on_cuda.then_some(match ep {
            Ep::Cuda(d) => d,
            _ => 0,
        });
        Ok(Sessions {
            model: model.to_path_buf(),
            threads,
            cuda,
            sessions: vec![(0, session)],
        })
    }

    /// The first session (for the model's inputs and outputs).
    pub fn first(&self) -> &Session {
        &self.sessions[0].1
    }

    /// The CUDA device the sessions run on, if they run on CUDA's execution provider.
    pub fn cuda(&self) -> Option<i32> {
        self.cuda
    }

    /// The batch size to run `rows` rows at, when the input has room for `room` rows: `rows` on
    /// the CPU; on CUDA the next power of two (at least [`Self::MIN_ROWS`]) when it fits.
    pub fn padded(&self, rows: usize, room: usize) -> usize {
        let padded = rows.next_power_of_two().max(Self::MIN_ROWS);
        if self.cuda.is_some() && padded <= room {
            padded
        } else {
            rows
        }
    }

    /// The session that runs batches of `rows` rows (made now if it is the first run of that
    /// size on CUDA).
    pub fn get(&mut self, rows: usize) -> Result<&mut Session, OnnxError> {
        if self.cuda.is_none() {
            return Ok(&mut self.sessions[0].1);
        }
        let i = match self.sessions.iter().position(|(r, _)| *r == rows) {
            Some(i) => i,
            None if self.sessions[0].0 == 0 => {
                self.sessions[0].0 = rows;
                0
            }
            None => {
                let ep = Ep::Cuda(self.cuda.unwrap_or(0));
                let (session, _) = session_on(&self.model, self.threads, ep)?;
                self.sessions.push((rows, session));
                self.sessions.len() - 1
            }
        };
        Ok(&mut self.sessions[i].1)
    }
}

/// An ONNX Runtime session for the model at `model` on the CPU execution provider, with `threads`
/// intra-op threads (0: ONNX Runtime's default).
pub fn session(model: &Path, threads: usize) -> Result<Session, OnnxError> {
    build(model, threads, None)
}

fn build(
    model: &Path,
    threads: usize,
    ep: Option<ort::ep::ExecutionProviderDispatch>,
) -> Result<Session, OnnxError> {
    let model_err = |reason: String| OnnxError::Model {
        path: model.display().to_string(),
        reason,
    };
    if !model.is_file() {
        return Err(model_err("no such file".into()));
    }
    let env = environment()?;
    // ONNX Runtime's worker threads spin between runs by default; with a pipeline of busy
    // stage threads on few cores that steals time from the other stages.
    let mut builder = Session::builder(env)
        .and_then(|b| Ok(b.with_config_entry("session.intra_op.allow_spinning", "0")?))
        .map_err(|e| model_err(e.to_string()))?;
    if threads > 0 {
        builder = builder
            .with_intra_threads(threads)
            .map_err(|e| model_err(e.to_string()))?;
    }
    if let Some(prefix) = std::env::var_os(ORT_PROFILE_ENV) {
        builder = builder
            .with_profiling(prefix)
            .map_err(|e| model_err(e.to_string()))?;
    }
    if let Some(ep) = ep {
        builder = builder
            .with_execution_providers([ep])
            .map_err(|e| model_err(format!("CUDA execution provider: {e}")))?;
    }
    builder
        .commit_from_file(model)
        .map_err(|e| model_err(format!("not a loadable ONNX model: {e}")))
}
