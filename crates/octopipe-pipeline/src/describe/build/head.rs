//! The GStreamer head of a chain: which names are GStreamer elements, and the launch fragment
//! they make.

use super::super::{closest, quote, DescribeError, Description, StageDesc};
use octopipe_core::description::shown_word;
use octopipe_core::stage::Registry;

/// How many of `stages` form a GStreamer head (elements before the first octopipe stage).
pub(super) fn gstreamer_head(
    desc: &Description,
    registry: &Registry,
    stages: &[StageDesc],
) -> Result<usize, DescribeError> {
    let mut head = 0;
    while head < stages.len() {
        let st = &stages[head];
        let element =
            (head > 0 && is_gstreamer_namesake(registry, st)) || is_gstreamer(desc, registry, st)?;
        if !element {
            break;
        }
        head += 1;
    }
    Ok(head)
}

/// Inside a GStreamer head: whether `st` names a GStreamer element that has an octopipe stage's
/// name (`queue`) and none of that stage's properties, and so is the GStreamer element.
pub(super) fn is_gstreamer_namesake(registry: &Registry, st: &StageDesc) -> bool {
    let Some(decl) = registry.get(&st.kind) else {
        return false;
    };
    let octopipe_prop = st
        .props
        .iter()
        .any(|p| decl.props.iter().any(|d| d.name == p.key));
    !st.reference && !octopipe_prop && octopipe_sources::element_exists(&st.kind)
}

/// The head's elements as gst-launch text, rebuilt from the parsed elements so that variables
/// are substituted. Every value is written so that GStreamer's parser gives the element exactly
/// that value and no value can end its element or chain ([`quote::gst_value`]); a key that is
/// not a property name, or a value with a control character, is an error at it.
pub(super) fn fragment(desc: &Description, stages: &[StageDesc]) -> Result<String, DescribeError> {
    let mut elements = Vec::with_capacity(stages.len());
    for st in stages {
        let mut e = st.kind.clone();
        for p in &st.props {
            if !quote::gst_key(&p.key) {
                return Err(desc.error(
                    p.key_span,
                    format!("'{}' is not a GStreamer property name", p.key),
                ));
            }
            let value = quote::gst_value(&p.value)
                .map_err(|why| desc.error(p.value_span, format!("{}: {why}", p.key)))?;
            e += &format!(" {}={value}", p.key);
        }
        elements.push(e);
    }
    Ok(elements.join(" ! "))
}

/// The error of stage `st` of `desc`, which `registry` does not know: at its name, with the
/// closest name it knows as a hint.
pub fn unknown(desc: &Description, registry: &Registry, st: &StageDesc) -> DescribeError {
    let hint = closest(&st.kind, registry.names())
        .map(|c| format!(" (did you mean '{c}'?)"))
        .unwrap_or_else(|| {
            format!(
                " (stages: {})",
                registry.names().collect::<Vec<_>>().join(", ")
            )
        });
    desc.error(
        st.span,
        format!("unknown stage '{}'{hint}", shown_word(&st.kind)),
    )
}

/// Whether `st` names a GStreamer element or caps (an element of a branch's GStreamer head).
pub(super) fn is_gstreamer(
    desc: &Description,
    registry: &Registry,
    st: &StageDesc,
) -> Result<bool, DescribeError> {
    if st.reference || registry.get(&st.kind).is_some() {
        return Ok(false);
    }
    if st.kind.contains('/') {
        super::super::caps::check(desc, st)?;
        return Ok(true);
    }
    // An installed element first: `queue2` is GStreamer's, not a misspelt `queue`.
    if octopipe_sources::element_exists(&st.kind) {
        return Ok(true);
    }
    if closest(&st.kind, registry.names()).is_some() {
        return Err(unknown(desc, registry, st));
    }
    let elements = octopipe_sources::element_names();
    let hint = closest(&st.kind, elements.iter().map(String::as_str))
        .map(|c| format!(" (did you mean the GStreamer element '{c}'?)"))
        .unwrap_or_default();
    Err(desc.error(
        st.span,
        format!(
            "unknown stage '{}': neither an octopipe stage ({}) nor an installed GStreamer element{hint}",
            shown_word(&st.kind),
            registry.names().collect::<Vec<_>>().join(", ")
        ),
    ))
}
