//! Classifiers one after the other on the same boxes (`... ! classify ! classify name=color !
//! ...`): each is told its place in the run of them ([`ChainPlace`]), so that each keeps its
//! answer on the box under its name and the first's stays the box's main result.
//!
//! A classifier's name is its `name=`, up to any `@` that a GPU's copy of it added
//! (`batch devices=`: `color@1` is `color`), else `classify`, `classify1`, ... by its place in
//! the run. A classifier alone keeps no place: its answer is the box's main result only.
//!
//! The classifiers of a run reuse their tracks' labels alike or not at all: the batch stage
//! before them makes one crop plan, so their `reinfer-interval`s must be equal, and with one
//! above 1 they share one [`Reinfer`].

use super::pending::Pending;
use octopipe_core::stage::{Element, Reinfer};
use octopipe_onnx::classify::{ChainPlace, ClassifyConfig};

/// Tell the classifier `element` (named `name=name` when given), about to follow `nodes`, its
/// place among the classifiers that end `nodes`, and the one before it that it is the first when
/// it had no place yet. Any other stage is left as it is. Two classifiers of a run with the same
/// name are an error (the message); a default name already taken moves to the next number.
pub(super) fn place_classifier(
    nodes: &mut [Pending],
    element: &mut dyn Element,
    name: Option<&str>,
) -> Result<(), String> {
    let Some(config) = element.downcast_mut::<ClassifyConfig>() else {
        return Ok(());
    };
    let run = nodes
        .iter()
        .rev()
        .take_while(|n| n.element.downcast_ref::<ClassifyConfig>().is_some())
        .count();
    if run == 0 {
        return Ok(());
    }
    let at = nodes.len() - run;
    let first = &mut nodes[at];
    let first_name = given(first.name.as_deref());
    let mut shared = None;
    if let Some(first) = first.element.downcast_mut::<ClassifyConfig>() {
        let (theirs, ours) = (first.reinfer_interval, config.reinfer_interval);
        if theirs != ours {
            let name = given(name).unwrap_or_else(|| ChainPlace::default_name(run));
            let before = first_name.unwrap_or_else(|| ChainPlace::default_name(0));
            return Err(format!(
                "{name}: reinfer-interval={ours}, but the first classifier on the same boxes \
                 ({before}) has reinfer-interval={theirs}: the batch stage makes one crop plan \
                 for them (no crop of a box whose label is reused), so give them the same interval"
            ));
        }
        if first.chain.is_none() {
            let name = first_name.unwrap_or_else(|| ChainPlace::default_name(0));
            first.chain = Some(ChainPlace {
                name: name.into(),
                first: true,
                reinfer: (ours > 1).then(|| Reinfer::new(ours)),
            });
        }
        shared = first.chain.as_ref().and_then(|c| c.reinfer.clone());
    }
    let taken: Vec<String> = nodes[at..]
        .iter()
        .filter_map(|n| n.element.downcast_ref::<ClassifyConfig>()?.chain.as_ref())
        .map(|p| p.name.to_string())
        .collect();
    let name = match given(name) {
        Some(name) if taken.contains(&name) => {
            return Err(format!(
                "two classifiers on the same boxes are both named '{name}': give one another name="
            ))
        }
        Some(name) => name,
        None => (run..)
            .map(ChainPlace::default_name)
            .find(|n| !taken.contains(n))
            .unwrap_or_default(),
    };
    config.chain = Some(ChainPlace {
        name: name.into(),
        first: false,
        reinfer: shared,
    });
    Ok(())
}

/// A given `name=` without the `@...` a GPU's copy added (`None` for a name that is all suffix).
fn given(name: Option<&str>) -> Option<String> {
    let name = name?;
    let base = name.split('@').next().unwrap_or(name);
    (!base.is_empty()).then(|| base.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Each classifier's place in the graph of `text`, in node order.
    fn chain_places(text: &str) -> Result<Vec<Option<ChainPlace>>, String> {
        let desc =
            super::super::super::parse("t", text, &HashMap::new()).map_err(|e| e.to_string())?;
        let graph = super::super::build(&desc).map_err(|e| e.to_string())?;
        Ok(graph
            .nodes
            .iter()
            .filter_map(|n| n.element.downcast_ref::<ClassifyConfig>())
            .map(|c| c.chain.clone())
            .collect())
    }

    /// Each classifier's name and whether it is the first, in node order.
    fn places(text: &str) -> Result<Vec<Option<(String, bool)>>, String> {
        Ok(chain_places(text)?
            .into_iter()
            .map(|p| p.map(|p| (p.name.to_string(), p.first)))
            .collect())
    }

    fn place(name: &str, first: bool) -> Option<(String, bool)> {
        Some((name.to_string(), first))
    }

    const HEAD: &str = "testsrc ! boxes format=synthetic ! batch ! preprocess";

    #[test]
    fn classifiers_in_a_chain_get_their_names_and_the_first_is_the_main_one() {
        let alone = places(&format!(
            "{HEAD} ! classify model=m.onnx ! jsonl location=o"
        ));
        assert_eq!(alone.unwrap(), [None], "a classifier alone keeps no place");
        let named = places(&format!(
            "{HEAD} ! classify model=m.onnx ! classify name=color model=c.onnx \
             ! classify model=d.onnx ! jsonl location=o"
        ));
        assert_eq!(
            named.unwrap(),
            [
                place("classify", true),
                place("color", false),
                place("classify2", false)
            ]
        );
        let taken = places(&format!(
            "{HEAD} ! classify name=classify1 model=m.onnx ! classify model=c.onnx ! jsonl location=o"
        ));
        assert_eq!(
            taken.unwrap(),
            [place("classify1", true), place("classify2", false)],
            "a default name already taken moves on"
        );
        let twice = places(&format!(
            "{HEAD} ! classify model=m.onnx ! classify name=classify model=c.onnx ! jsonl location=o"
        ));
        assert!(twice.unwrap_err().contains("both named 'classify'"));
    }

    #[test]
    fn a_gpus_copy_of_a_named_classifier_keeps_its_name() {
        let text = "testsrc ! boxes format=synthetic ! mux.\n\
                    testsrc ! boxes format=synthetic ! batch name=mux devices=0,1 ! preprocess \
                    ! classify name=kind model=m.onnx ! classify name=color model=c.onnx \
                    ! jsonl location=o";
        assert_eq!(
            places(text).unwrap(),
            [
                place("kind", true),
                place("color", false),
                place("kind", true),
                place("color", false)
            ]
        );
    }

    /// Each classifier's shared plan of reused labels in the graph of `text`, in node order.
    fn plans(text: &str) -> Result<Vec<Option<Reinfer>>, String> {
        Ok(chain_places(text)?
            .into_iter()
            .map(|p| p.and_then(|p| p.reinfer))
            .collect())
    }

    #[test]
    fn a_chains_classifiers_reuse_labels_alike_from_one_plan() {
        let chain = |a: u64, b: u64| {
            plans(&format!(
                "testsrc ! boxes format=synthetic ! track ! batch ! preprocess \
                 ! classify model=m.onnx reinfer-interval={a} \
                 ! classify name=color model=c.onnx reinfer-interval={b} ! jsonl location=o"
            ))
        };
        let shared = chain(10, 10).unwrap();
        assert!(shared[0].is_some());
        assert_eq!(shared[0], shared[1], "one plan for both");
        assert_eq!(shared[0].as_ref().map(Reinfer::interval), Some(10));
        assert_eq!(chain(1, 1).unwrap(), [None, None]);
        for (a, b) in [(10, 1), (1, 10), (10, 30)] {
            let e = chain(a, b).unwrap_err();
            assert!(
                e.contains(&format!(
                    "color: reinfer-interval={b}, but the first classifier on the same boxes \
                     (classify) has reinfer-interval={a}"
                )),
                "{e}"
            );
        }
        // A GPU's copy of the chain has a plan of its own.
        let copies = plans(
            "testsrc ! boxes format=synthetic ! mux.\n\
             testsrc ! boxes format=synthetic ! track ! batch name=mux devices=0,1 ! preprocess \
             ! classify model=m.onnx reinfer-interval=5 ! classify name=color model=c.onnx \
             reinfer-interval=5 ! jsonl location=o",
        )
        .unwrap();
        assert_eq!(copies.len(), 4);
        assert_eq!(copies[0], copies[1]);
        assert_eq!(copies[2], copies[3]);
        assert_ne!(copies[0], copies[2]);
    }
}
