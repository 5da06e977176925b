//! The config file parser: the input is the file's text. It parses and
//! validates to settings or to an error, never a panic.
#![no_main]

use std::path::Path;

use bubble_server::cli::ServeArgs;
use bubble_server::config::Settings;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = Settings::from_toml(&ServeArgs::default(), Path::new("fuzz.toml"), text);
});
