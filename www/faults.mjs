// The fault simulator panel: runs bubble_core's deterministic simulator
// (the wasm `Simulation` class) over consecutive seeds, a few per task so
// the page stays responsive, and shows the first failure with its shrunk
// replay. Every fault and invariant is the engine's (docs/simulation.md).

import { el } from './timeline.mjs';

const STEPS = 400;
const SEEDS = 200;
const PER_SLICE = 5;

export function mountFaultSimulator(wasm, root, seedInput) {
  if (!root || typeof wasm.Simulation !== 'function') return;
  const status = el('p', { class: 'panel-note', id: 'faults-status' },
    `${SEEDS} seeds × ${STEPS} steps: clustered engines, delayed and failed reads and commits, conflicts, lost changes, stalls, crashes.`);
  const button = el('button', { class: 'secondary', id: 'faults-run' }, `Check ${SEEDS} seeds`);
  const report = el('pre', { class: 'faults-report', id: 'faults-report', hidden: '' });
  root.append(el('section', { class: 'panel' }, el('h2', {}, 'Fault simulator'), status, button, report));

  button.onclick = () => {
    const first = Number.parseInt(seedInput?.value, 10) || 0;
    button.disabled = true;
    report.hidden = true;
    let seed = first;
    const slice = () => {
      for (const until = Math.min(first + SEEDS, seed + PER_SLICE); seed < until; seed += 1) {
        const failure = wasm.Simulation.check(seed, STEPS);
        if (failure) {
          status.textContent = `seed ${seed} failed`;
          report.textContent = failure;
          report.hidden = false;
          button.disabled = false;
          return;
        }
      }
      const done = seed - first;
      status.textContent = done < SEEDS
        ? `${done} of ${SEEDS} seeds passed (from ${first})`
        : `${SEEDS} seeds from ${first} (${SEEDS * STEPS} steps) kept every invariant`;
      if (done < SEEDS) setTimeout(slice, 0);
      else button.disabled = false;
    };
    setTimeout(slice, 0);
  };
}
