//! The preprocess stage: its element, its running stage and its declaration.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use octopipe_core::budget::Tally;
use octopipe_core::crops::CropBatch;
use octopipe_core::description::DescribeError;
use octopipe_core::error::Error;
use octopipe_core::stage::{
    Caps, Element, OpenContext, PageLocked, Properties, Props, Role, Running, Stage, StageDecl,
};

use super::backend::Backend;
use super::choose::create_backend;
use super::config::{BackendKind, Gather, PreprocessConfig, PreprocessProps};

/// The preprocess stage at run time: the backend, whether frames keep their pixels after it,
/// and the report its summary goes to at the end.
struct PreprocessStage {
    backend: Box<dyn Backend>,
    keep_pixels: Arc<AtomicBool>,
    tally: Tally,
}

impl Stage<CropBatch, CropBatch> for PreprocessStage {
    fn process(&mut self, mut batch: CropBatch, out: &mut Vec<CropBatch>) -> Result<(), Error> {
        self.backend.run(&mut batch)?;
        if !self.keep_pixels.load(Ordering::Relaxed) {
            batch.release_pixels();
        }
        out.push(batch);
        Ok(())
    }

    fn finish(&mut self, _out: &mut Vec<CropBatch>) -> Result<(), Error> {
        if let Some(line) = self.backend.summary() {
            self.tally.with(|t| t.add_line(line));
        }
        Ok(())
    }
}

/// The preprocess stage's element: its settings, told to the stages around it in the caps.
impl Element for PreprocessConfig {
    fn configure(&mut self, caps: &mut Caps) {
        tell(caps, self.clone());
    }
    fn open(self: Box<Self>, ctx: &mut OpenContext) -> Result<Running, Error> {
        let mut config = *self;
        // The model downstream settles the size when it opens first.
        if let Some(settled) = ctx.caps.get::<PreprocessConfig>().and_then(|c| c.size) {
            config.size = Some(settled);
        }
        let backend = create_backend(&config)?;
        let line = format!("preprocess backend: {}", backend.name());
        ctx.tally.with(|t| t.add_line(line));
        tell(ctx.caps, config);
        Ok(Running::stage(Box::new(PreprocessStage {
            backend,
            keep_pixels: ctx.keep_pixels.clone(),
            tally: ctx.tally.clone(),
        })))
    }
}

/// Tell the stages around the settings `config`, and the sources whether they should give
/// page-locked frames ([`PageLocked`], from [`PreprocessConfig::page_locked_frames`]).
fn tell(caps: &mut Caps, config: PreprocessConfig) {
    match config.page_locked_frames() {
        Some(device) => caps.insert(PageLocked::new(device)),
        None => caps.remove::<PageLocked>(),
    };
    caps.insert(config);
}

/// `preprocess size=64x64 mean=... std=... channels=rgb layout=nchw`.
pub const PREPROCESS: StageDecl = StageDecl {
    name: "preprocess",
    role: Role::Preprocess,
    doc: "crop + bilinear resize (OpenCV INTER_LINEAR) + colour conversion + mean/std",
    props: PreprocessProps::PROPS,
    needs: &[Role::Batch],
    provides: &[],
    make: preprocess_config,
};

fn preprocess_config(p: &Props) -> Result<Box<dyn Element>, DescribeError> {
    let props = PreprocessProps::from_props(p)?;
    if props.gather == Gather::Device && props.compute.backend == BackendKind::Cpu {
        return Err(p.error(
            "gather",
            "preprocess: gather=device is the CUDA backend's: use backend=cuda (or auto)",
        ));
    }
    Ok(Box::new(PreprocessConfig::from(props)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sources read page-locking from the caps alone: a backend that may gather on the GPU
    /// asks for it (for its device), and a later configuration that will not takes it back.
    #[test]
    fn a_gpu_gather_asks_the_sources_for_page_locked_frames_and_a_host_gather_does_not() {
        let mut caps = Caps::default();
        let mut cuda = PreprocessConfig {
            backend: BackendKind::Cuda,
            gather: Gather::Auto,
            device: 1,
            ..PreprocessConfig::default()
        };
        cuda.configure(&mut caps);
        assert_eq!(caps.get::<PageLocked>(), Some(&PageLocked::new(1)));
        let mut host = PreprocessConfig {
            gather: Gather::Host,
            ..cuda.clone()
        };
        host.configure(&mut caps);
        assert_eq!(caps.get::<PageLocked>(), None);
        let mut device = PreprocessConfig {
            gather: Gather::Device,
            ..cuda.clone()
        };
        device.configure(&mut caps);
        assert_eq!(caps.get::<PageLocked>(), Some(&PageLocked::new(1)));
        let mut cpu = PreprocessConfig {
            backend: BackendKind::Cpu,
            ..cuda
        };
        cpu.configure(&mut caps);
        assert_eq!(caps.get::<PageLocked>(), None);
        assert_eq!(
            caps.get::<PreprocessConfig>().map(|c| c.backend),
            Some(BackendKind::Cpu)
        );
    }
}
