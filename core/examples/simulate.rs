//! Runs the deterministic simulator over many seeds, or replays one.
//!
//! ```text
//! cargo run -p bubble-core --example simulate --features sim -- --seeds 100000
//! cargo run -p bubble-core --example simulate --features sim -- --seeds 1000 --first 5000 --steps 2000
//! cargo run -p bubble-core --example simulate --features sim -- --seed 42
//! cargo run -p bubble-core --example simulate --features sim -- --seed 42 --keep 3,17,40 --trace
//! ```
//!
//! `--keep` replays only those steps of the seed's run (what a failure
//! prints); `--trace` prints every step, input and output of that replay.
//!
//! Exits 1 at the first failing seed, printing it and its shrunk replay.

use std::process::ExitCode;

use bubble_core::sim;

struct Args {
    first: u64,
    seeds: u64,
    steps: usize,
    keep: Option<Vec<usize>>,
    trace: bool,
}

fn parse() -> Result<Args, String> {
    let mut args = Args {
        first: 0,
        seeds: 1000,
        steps: 400,
        keep: None,
        trace: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--trace" {
            args.trace = true;
            continue;
        }
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number = || {
            value
                .parse::<u64>()
                .map_err(|e| format!("{flag} {value}: {e}"))
        };
        match flag.as_str() {
            "--seeds" => args.seeds = number()?,
            "--first" => args.first = number()?,
            "--seed" => {
                args.first = number()?;
                args.seeds = 1;
            }
            "--steps" => args.steps = usize::try_from(number()?).map_err(|e| e.to_string())?,
            "--keep" => {
                let kept: Result<Vec<usize>, _> = value.split(',').map(str::parse).collect();
                args.keep = Some(kept.map_err(|e| format!("--keep {value}: {e}"))?);
            }
            other => return Err(format!("unknown flag {other}")),
        }
    }
    Ok(args)
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("simulate: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(kept) = &args.keep {
        let steps = sim::kept_steps(args.first, kept);
        let (result, trace) = sim::trace(args.first, &steps);
        if args.trace {
            for line in trace {
                println!("{line}");
            }
        }
        return match result {
            Ok(stats) => {
                println!(
                    "seed {} with {} kept steps passes: {stats:?}",
                    args.first,
                    kept.len()
                );
                ExitCode::SUCCESS
            }
            Err((at, message)) => {
                println!("seed {} fails at kept step {at}: {message}", args.first);
                ExitCode::FAILURE
            }
        };
    }
    let (mut steps, mut events) = (0u64, 0u64);
    for seed in args.first..args.first + args.seeds {
        match sim::check_seed(seed, args.steps) {
            Ok(stats) => {
                steps += stats.steps as u64;
                events += stats.events;
            }
            Err(failure) => {
                println!("{failure}");
                return ExitCode::FAILURE;
            }
        }
    }
    println!(
        "{} seeds from {} passed: {steps} steps, {events} durable events",
        args.seeds, args.first
    );
    ExitCode::SUCCESS
}
