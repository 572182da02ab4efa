//! Any text through `describe::parse` then `describe::build`: an error is fine, a panic is not.
//! Error positions must lie inside the text.
#![no_main]

use std::collections::HashMap;

use libfuzzer_sys::fuzz_target;
use octopipe::describe;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let vars: HashMap<String, String> = [("root", "/r"), ("model", "/m.onnx"), ("out", "/o")]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let result = describe::parse("<fuzz>", text, &vars).and_then(|d| describe::build(&d));
    if let Err(e) = result {
        assert!(e.line >= 1 && e.column >= 1, "{e:?}");
        assert!(e.line <= text.lines().count().max(1) + 1, "{e:?}");
        let _ = e.to_string();
    }
});
