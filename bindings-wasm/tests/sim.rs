//! The `Simulation` class on wasm (feature `sim`), run in Node by
//! `wasm-bindgen-test-runner`: a seed steps to its end and keeps every
//! invariant, its snapshot is the core's, the same seed replays the same
//! run, and a whole-seed check passes.
#![cfg(all(target_arch = "wasm32", feature = "sim"))]

use bubble_wasm::WasmSimulation;
use wasm_bindgen_test::wasm_bindgen_test;

fn snapshot(sim: &WasmSimulation) -> serde_json::Value {
    serde_json::from_str(&sim.snapshot()).expect("the snapshot is JSON")
}

#[wasm_bindgen_test]
fn a_seed_steps_to_its_end_and_keeps_every_invariant() {
    let mut sim = WasmSimulation::new(42.0, 200);
    assert_eq!(sim.run(60), 60);
    let view = snapshot(&sim);
    assert_eq!(view["seed"], 42);
    assert_eq!(view["done"], 60);
    assert_eq!(view["total"], 200);
    assert_eq!(view["heads"].as_array().map(Vec::len), Some(3));
    let mut steps = 0;
    while sim.step().is_some() {
        steps += 1;
    }
    assert_eq!(steps, 141, "140 steps left, then the final settle");
    assert!(sim.finished());
    assert_eq!(sim.violation(), None);
}

#[wasm_bindgen_test]
fn the_same_seed_replays_the_same_run() {
    let run = |seed: f64| {
        let mut sim = WasmSimulation::new(seed, 150);
        let mut described = Vec::new();
        while let Some(step) = sim.step() {
            described.push(step);
        }
        (described, sim.snapshot())
    };
    assert_eq!(run(7.0), run(7.0));
    assert_ne!(run(7.0), run(8.0));
}

#[wasm_bindgen_test]
fn whole_seeds_are_checked() {
    for seed in 0..10 {
        assert_eq!(
            WasmSimulation::check(f64::from(seed), 200),
            None,
            "seed {seed}"
        );
    }
}
