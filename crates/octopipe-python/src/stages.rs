//! Stages from keyword arguments: `octopipe.stage(kind, **props)` writes a stage's description
//! text from Python values, `octopipe.properties(kind)` gives its property table, and
//! `Pipeline.from_stages([...])` joins stages into a chain. Every property is checked against
//! the stage's declared table (the one `inspect` prints and the description builder checks),
//! with the builder's own error.
//!
//! A keyword is the property's name with `_` for `-` (`max_batch` is `max-batch`; the
//! kebab-case name itself is taken too, from a dict). Values: `None` leaves the property out,
//! `bool` is `true`/`false`, `str` as it is, a path (`os.PathLike`) its `os.fspath`, a list or
//! tuple its items joined by commas (two numbers for a `WxH` property: `(64, 64)` is `64x64`),
//! and anything else its `str()` (int, float, NumPy scalars).

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyList, PyString, PyTuple};

use octopipe::stage::{PropSpec, PropType, Registry, NAME_PROP};
use octopipe::Builtin;

use crate::errors::to_py;

/// The property a keyword names: `max_batch` -> `max-batch`.
pub fn property_name(keyword: &str) -> String {
    keyword.replace('_', "-")
}

/// The keyword of a property: `max-batch` -> `max_batch`.
fn keyword(name: &str) -> String {
    name.replace('-', "_")
}

/// `value` as the text of property `spec` of stage `kind` (`None`: left out).
fn value_text(
    kind: &str,
    name: &str,
    spec: Option<&PropSpec>,
    value: &Bound<'_, PyAny>,
) -> PyResult<Option<String>> {
    if value.is_none() {
        return Ok(None);
    }
    if value.is_instance_of::<PyBool>() {
        let b: bool = value.extract()?;
        return Ok(Some(if b { "true" } else { "false" }.to_string()));
    }
    if value.is_instance_of::<PyString>() {
        return Ok(Some(value.extract()?));
    }
    if value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>() {
        let mut items = Vec::new();
        for item in value.try_iter()? {
            let item = item?;
            if item.is_instance_of::<PyList>()
                || item.is_instance_of::<PyTuple>()
                || item.is_instance_of::<PyDict>()
            {
                return Err(PyTypeError::new_err(format!(
                    "stage '{kind}': {name}: a list item must be a single value"
                )));
            }
            items.extend(value_text(kind, name, None, &item)?);
        }
        let size = matches!(spec.map(|s| s.ty), Some(PropType::Size { .. })) && items.len() == 2;
        return Ok(Some(items.join(if size { "x" } else { "," })));
    }
    if value.is_instance_of::<PyDict>() {
        return Err(PyTypeError::new_err(format!(
            "stage '{kind}': {name}: a dict is no property value"
        )));
    }
    if value.hasattr("__fspath__")? {
        let os = value.py().import("os")?;
        return Ok(Some(os.call_method1("fspath", (value,))?.str()?.extract()?));
    }
    Ok(Some(value.str()?.extract()?))
}

/// The description text of stage `kind` with `props` (keywords or property names to Python
/// values), checked against its declared properties: the builder's `DescriptionError` for an
/// unknown stage or property, or a value not of its type.
pub fn stage_text(
    py: Python<'_>,
    registry: &Registry,
    kind: &str,
    props: Option<&Bound<'_, PyDict>>,
) -> PyResult<String> {
    let decl = registry.get(kind);
    let mut written = Vec::new();
    if let Some(props) = props {
        for (k, v) in props.iter() {
            let key: String = k.extract().map_err(|_| {
                PyTypeError::new_err(format!("stage '{kind}': property names must be str"))
            })?;
            let name = property_name(&key);
            let spec = decl.and_then(|d| d.props.iter().find(|s| s.name == name));
            if let Some(text) = value_text(kind, &name, spec, &v)? {
                written.push((name, text));
            }
        }
    }
    octopipe::describe::stage_text(registry, kind, &written)
        .map_err(|e| to_py(py, octopipe::Error::Describe(e)))
}

/// The description text of a chain of `stages`: each a stage's text (`str`, written as it is:
/// what `stage()` gives, or any description fragment) or a `(kind, props)` pair (`props` a dict
/// of keywords or property names, checked as `stage()` checks them), joined by ` ! `.
pub fn chain_text(py: Python<'_>, stages: &Bound<'_, PyAny>) -> PyResult<String> {
    let registry = Registry::builtin();
    let mut parts = Vec::new();
    for (i, entry) in stages.try_iter()?.enumerate() {
        let entry = entry?;
        if entry.is_instance_of::<PyString>() {
            parts.push(entry.extract::<String>()?);
            continue;
        }
        let pair: Option<(String, Option<Bound<'_, PyDict>>)> = entry.extract().ok();
        let Some((kind, props)) = pair else {
            return Err(PyTypeError::new_err(format!(
                "stages[{i}]: expected a stage's text (str) or a (kind, props dict) pair"
            )));
        };
        parts.push(stage_text(py, &registry, &kind, props.as_ref())?);
    }
    if parts.is_empty() {
        return Err(PyValueError::new_err("from_stages: no stages"));
    }
    Ok(parts.join(" ! "))
}

/// Stage `kind`'s properties as `inspect` shows them: a dict per property (`name`, `keyword`,
/// `type`, `default`, `doc`), the `name` property last.
pub fn properties(py: Python<'_>, kind: &str) -> PyResult<Vec<Py<PyDict>>> {
    let registry = Registry::builtin();
    let Some(decl) = registry.get(kind) else {
        return Err(unknown_stage(&registry, kind));
    };
    let row = |name: &str, ty: &str, default: &str, doc: &str| -> PyResult<Py<PyDict>> {
        let d = PyDict::new(py);
        d.set_item("name", name)?;
        d.set_item("keyword", keyword(name))?;
        d.set_item("type", ty)?;
        d.set_item("default", default)?;
        d.set_item("doc", doc)?;
        Ok(d.unbind())
    };
    let mut out = Vec::new();
    for p in decl.props {
        if matches!(p.ty, PropType::Renamed { .. }) {
            continue;
        }
        out.push(row(p.name, &p.ty.name(), p.default, p.doc)?);
    }
    let name = NAME_PROP;
    out.push(row(name.name, &name.ty.name(), name.default, name.doc)?);
    Ok(out)
}

/// `ValueError` for a stage `name` that is not in `registry`, naming the closest one.
pub(crate) fn unknown_stage(registry: &octopipe::stage::Registry, name: &str) -> PyErr {
    let hint = octopipe::describe::closest(name, registry.names())
        .map(|c| format!(" (did you mean '{c}'?)"))
        .unwrap_or_default();
    pyo3::exceptions::PyValueError::new_err(format!("unknown stage '{name}'{hint}"))
}
