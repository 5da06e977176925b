//! `bubble`: the native server.

use std::io::IsTerminal;
use std::process::ExitCode;

use bubble_server::cli::{Cli, Command};
use bubble_server::config::Settings;
use clap::Parser;
use tracing_subscriber::EnvFilter;

/// Every request, frame and event allocates; glibc's allocator spent 11-15 %
/// of the server's CPU on appends (BENCHMARKS.md, run J), mimalloc a fraction.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .init();
    let Command::Serve(args) = cli.command;
    let settings = match Settings::load(&args) {
        Ok(settings) => settings,
        Err(e) => {
            eprintln!("bubble: {e}");
            return ExitCode::from(2);
        }
    };
    match bubble_server::server::run(settings) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "bubble stopped");
            eprintln!("bubble: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
