//! The whole engine through the simulator's host (`bubble_core::sim`):
//! the input's first byte seeds the deployment (two or three clustered
//! engines over one store), the rest is decoded into simulator steps
//! (`sim::steps_from_bytes`: client actions of both protocols and every
//! host fault: reads answered out of order or failed, commits held,
//! grouped, refused or failed, a second writer, broker messages delayed
//! or dropped, stalls, time jumps, node crashes). After every step the
//! simulator checks its invariants; a breach panics with the step and
//! what broke, and libFuzzer keeps the input.
#![no_main]

use bubble_core::sim;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((seed, rest)) = data.split_first() else {
        return;
    };
    let steps = sim::steps_from_bytes(rest);
    if let Err((at, message)) = sim::replay(u64::from(*seed), &steps) {
        panic!(
            "simulator invariant broken at step {at} of {}: {message}\nsteps: {steps:?}",
            steps.len()
        );
    }
});
