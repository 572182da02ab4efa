//! Where a description's text comes from: a file, or the command line itself.

/// Where an inline description comes from, in messages.
pub const COMMAND_LINE: &str = "<command line>";

/// The text of a description given as `octopipe run PIPELINE` takes it, with its origin for
/// messages: an existing file or a `.pipe` name is read (its path is the origin), anything else
/// is the description itself ([`COMMAND_LINE`]). Every front end that takes descriptions this
/// way (the command line, the Python module) reports the same errors.
pub fn load(pipeline: &str) -> std::io::Result<(String, String)> {
    if std::path::Path::new(pipeline).is_file() || pipeline.ends_with(".pipe") {
        Ok((pipeline.to_string(), std::fs::read_to_string(pipeline)?))
    } else {
        Ok((COMMAND_LINE.to_string(), pipeline.to_string()))
    }
}
