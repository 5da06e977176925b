// The playground page: loads the engine (wasm), plays the offline
// simulation (sim.mjs: the core's deterministic simulator) and switches to
// the live mode (live.mjs).

import init, * as wasm from './pkg/bubble_wasm.js';
import { startLive } from './live.mjs';
import { CHECK_SEEDS, SimulationView } from './sim.mjs';

const $ = (id) => document.getElementById(id);

let lastFrame = 0;

function switchMode(view, mode) {
  for (const b of document.querySelectorAll('.modes button')) b.setAttribute('aria-selected', String(b.dataset.mode === mode));
  $('sim').hidden = mode !== 'sim';
  $('live').hidden = mode !== 'live';
  if (mode !== 'sim') view.setPlaying(false);
}

async function main() {
  await init();
  $('engine-state').textContent = 'engine: WebAssembly';
  $('engine-state').dataset.ready = 'true';
  const view = new SimulationView(wasm, $);
  const restart = () => {
    view.setPlaying(false);
    view.restart($('seed').value);
  };
  $('restart').onclick = restart;
  $('seed').onkeydown = (e) => e.key === 'Enter' && restart();
  $('play').onclick = () => view.setPlaying(!view.playing);
  $('step').onclick = () => view.advance(1);
  $('forward').onclick = () => view.finish();
  $('faults-run').textContent = `Check ${CHECK_SEEDS} seeds`;
  $('faults-run').onclick = () => view.checkSeeds();
  for (const b of document.querySelectorAll('.modes button')) b.onclick = () => switchMode(view, b.dataset.mode);
  startLive();
  view.restart($('seed').value);
  view.setPlaying(true);
  document.body.dataset.ready = 'true';
  const frame = (t) => {
    view.tick(Math.min(250, t - (lastFrame || t)));
    lastFrame = t;
    requestAnimationFrame(frame);
  };
  requestAnimationFrame(frame);
}

main().catch((err) => {
  $('engine-state').textContent = `engine failed to load: ${err.message}`;
  $('engine-state').dataset.ready = 'error';
  throw err;
});
