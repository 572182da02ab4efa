//! The `octopipe` command line: parses arguments and calls the library.

mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    match cli::real_main() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("octopipe: error: {}", cli::error_line(&e));
            ExitCode::FAILURE
        }
    }
}
