//! The deterministic simulator (`bubble_core::sim`) for JavaScript: run a
//! seed step by step and read the deployment and the invariants between
//! steps, or check a whole seed and get its shrunk replay. A thin adapter:
//! every rule and check is the core's.
//!
//! ```js
//! const sim = new Simulation(42, 400);
//! while (sim.step()) render(JSON.parse(sim.snapshot()));  // or sim.run(50)
//! sim.violation();                 // the first broken invariant, or undefined
//! Simulation.check(42, 400);       // undefined, or the seed's failure and replay
//! ```

use bubble_core::sim;
use wasm_bindgen::prelude::*;

/// One seed's run of the simulator, as a JavaScript class.
#[wasm_bindgen(js_name = Simulation)]
pub struct WasmSimulation {
    inner: sim::Simulation,
}

fn seed_of(seed: f64) -> u64 {
    seed.max(0.0) as u64
}

#[wasm_bindgen(js_class = Simulation)]
impl WasmSimulation {
    /// Seed `seed`'s run of `steps` steps (then a final settle), not started.
    #[wasm_bindgen(constructor)]
    pub fn new(seed: f64, steps: u32) -> WasmSimulation {
        WasmSimulation {
            inner: sim::Simulation::new(seed_of(seed), steps as usize),
        }
    }

    /// Runs the next step and describes it; `undefined` once the run is over.
    pub fn step(&mut self) -> Option<String> {
        self.inner.step().map(|step| step.to_string())
    }

    /// Runs up to `n` steps; returns how many ran.
    pub fn run(&mut self, n: u32) -> u32 {
        let mut ran = 0;
        while ran < n && self.inner.step().is_some() {
            ran += 1;
        }
        ran
    }

    /// The deployment as JSON (`bubble_core::sim::Snapshot`): clock, heads,
    /// clients, subscriptions, presence views, and the violation if any.
    pub fn snapshot(&self) -> String {
        serde_json::to_string(&self.inner.snapshot()).unwrap_or_default()
    }

    /// The first invariant broken so far, if any.
    pub fn violation(&self) -> Option<String> {
        self.inner.snapshot().violation
    }

    /// Whether the run is over (passed or failed).
    pub fn finished(&self) -> bool {
        self.inner.outcome().is_some()
    }

    /// Runs seed `seed` for `steps` steps at once: `undefined` when every
    /// invariant held, otherwise the failure with its seed and shrunk replay.
    pub fn check(seed: f64, steps: u32) -> Option<String> {
        sim::check_seed(seed_of(seed), steps as usize)
            .err()
            .map(|failure| failure.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_steps_to_the_end_and_passes() {
        let mut sim = WasmSimulation::new(42.0, 120);
        assert_eq!(sim.run(50), 50);
        let view: serde_json::Value = serde_json::from_str(&sim.snapshot()).unwrap();
        assert_eq!(view["done"], 50);
        assert_eq!(view["seed"], 42);
        while sim.step().is_some() {}
        assert!(sim.finished());
        assert_eq!(sim.violation(), None);
        assert_eq!(WasmSimulation::check(42.0, 120), None);
    }
}
