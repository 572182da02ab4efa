//! The handles an application takes from a built pipeline: those of its `app` sources (frames
//! in) and of its `appinfer` stages (batches out, labels back).

use octopipe_onnx::appinfer::{AppInfer, AppInferSettings};
use octopipe_sources::{AppSource, AppSourceSettings};

use super::Node;

/// The application's handles, by stage name.
#[derive(Default)]
pub(super) struct AppHandles {
    sources: Vec<(Option<String>, AppSource)>,
    infers: Vec<(Option<String>, AppInfer)>,
}

impl AppHandles {
    /// The handles of the `app` and `appinfer` stages among `nodes`, in pipeline order.
    pub(super) fn collect(nodes: &[Node]) -> Self {
        let mut handles = AppHandles::default();
        for n in nodes {
            if let Some(app) = n.element.downcast_ref::<AppSourceSettings>() {
                handles.sources.push((n.name.clone(), app.handle()));
            }
            if let Some(infer) = n.element.downcast_ref::<AppInferSettings>() {
                handles.infers.push((n.name.clone(), infer.handle()));
            }
        }
        handles
    }

    /// The `app` source named `name`, or the first one.
    pub(super) fn source(&self, name: Option<&str>) -> Option<AppSource> {
        first(&self.sources, name)
    }

    /// Every `app` source, in stream order.
    pub(super) fn sources(&self) -> Vec<AppSource> {
        self.sources.iter().map(|(_, s)| s.clone()).collect()
    }

    /// The `appinfer` stage named `name`, or the first one.
    pub(super) fn infer(&self, name: Option<&str>) -> Option<AppInfer> {
        first(&self.infers, name)
    }
}

fn first<T: Clone>(handles: &[(Option<String>, T)], name: Option<&str>) -> Option<T> {
    handles
        .iter()
        .find(|(n, _)| name.is_none() || n.as_deref() == name)
        .map(|(_, h)| h.clone())
}
