/**
 * Speech streaming: how soon the audio of a four-sentence input starts, against how long the
 * whole answer takes, through the appliance (its own `lia serve` process, HTTPS, a key) on
 * `POST /v1/audio/speech`. The engine speaks the sentences one at a time and hands each to
 * ffmpeg as soon as it is spoken, so the first bytes should leave after about a quarter of the
 * work: the ratio of a request is its time to the first audio bytes ÷ its time to the last
 * byte, both taken on the client (undici's `request` over open connections) from the send.
 * Reported: the median ratio over the runs with its spread (interquartile range ÷ median) and
 * the smallest and largest, the medians of both times, and the audio's length. Goal ≤ 0.5.
 *
 * The model is a designed VITS in the MMS-TTS layout (scripts/fixtures/tiny-vits.py): `--model
 * bench` (the default), bench-vits, which spends about a tenth of the audio's duration per
 * sentence on one or two cores (dense layers whose result is added times zero), as MMS-TTS on a
 * CPU, so that the figure shows the streaming; `tiny`, the test fixture, whose lookup costs
 * nothing, so that what is left is ffmpeg's start and the request's own costs.
 *
 * Run: `node --conditions=lia-source --import tsx bench/audio/speech.ts [--runs 20] [--format mp3] [--model bench|tiny]`
 * (needs `npm run fixtures`; the fixture is built here on first use otherwise). Prints the machine
 * first and the table last, and writes `bench/results/speech-<time>.json`.
 *
 * @module
 */
import os from 'node:os';
import { parseArgs } from 'node:util';
import { builtFixture } from '../../scripts/fixtures/build.js';
import { createModel } from '../../test/helpers/models.js';
import { ENGINE_ONLY } from '../../test/helpers/plugin-sets.js';
import { startApplianceProcess } from '../lib/appliance-process.js';
import { timedPost } from '../lib/connections.js';
import { machineInfo, machineLine } from '../lib/machine.js';
import { saveResult } from '../lib/results.js';
import { median, spread } from '../lib/stats.js';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '20' },
    format: { type: 'string', default: 'mp3' },
    model: { type: 'string', default: 'bench' },
  },
});
const RUNS = Number(values.runs);
const FORMAT = values.format;
const FIXTURE = values.model === 'tiny' ? 'tiny-vits' : 'bench-vits';

/** Four sentences of about the same length, so that the first is a quarter of the work. */
const INPUT = [
  'The first sentence of this answer is about as long as the others.',
  'A second sentence follows it and says nothing new at all.',
  'Then comes the third one, which is much like the two before.',
  'The fourth and last sentence ends the answer right here.',
].join(' ');

interface Run {
  firstMs: number;
  totalMs: number;
  bytes: number;
}

/** One request: the time to the first body bytes and to the end, from the send. */
async function speak(url: string, app: Awaited<ReturnType<typeof startApplianceProcess>>): Promise<Run> {
  const body = JSON.stringify({ model: 'voice', input: INPUT, voice: 'alloy', response_format: FORMAT });
  const { res, t0 } = await timedPost(url, { dispatcher: app.dispatcher(), headers: { authorization: `Bearer ${app.key}` }, body });
  if (res.statusCode !== 200) throw new Error(`HTTP ${res.statusCode}: ${await res.body.text()}`);
  let first = 0;
  let bytes = 0;
  for await (const chunk of res.body as AsyncIterable<Buffer>) {
    if (!first && chunk.length > 0) first = performance.now();
    bytes += chunk.length;
  }
  const end = performance.now();
  if (!first) throw new Error('the answer had no audio');
  return { firstMs: first - t0, totalMs: end - t0, bytes };
}

async function main(): Promise<void> {
  const machine = machineInfo();
  console.log(machineLine(machine));
  const folder = await builtFixture(FIXTURE, console.error);
  const app = await startApplianceProcess({
    plugins: { ...ENGINE_ONLY, 'api-openai': true, 'backend-transformers': true, engine: { options: { keepAlive: -1 } } },
  });
  try {
    await createModel(app, 'voice', folder);
    const url = `${app.url}/v1/audio/speech`;
    // Warm: the first request loads the model and onnxruntime.
    for (let i = 0; i < 2; i++) await speak(url, app);
    const runs: Run[] = [];
    for (let r = 0; r < RUNS; r++) {
      const run = await speak(url, app);
      runs.push(run);
      console.error(
        `run ${r + 1}/${RUNS}: first bytes ${run.firstMs.toFixed(1)} ms, whole ${run.totalMs.toFixed(1)} ms, ratio ${(run.firstMs / run.totalMs).toFixed(3)}`,
      );
    }
    const ratios = runs.map((r) => r.firstMs / r.totalMs);
    const result = {
      ratio: median(ratios),
      spread: spread(ratios),
      min: Math.min(...ratios),
      max: Math.max(...ratios),
      firstMs: median(runs.map((r) => r.firstMs)),
      totalMs: median(runs.map((r) => r.totalMs)),
      bytes: median(runs.map((r) => r.bytes)),
    };
    const load = os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' / ');
    console.log(`\n${machineLine(machine)}; load ${load} after the run`);
    console.log(`${FIXTURE}, four sentences (${INPUT.length} characters), ${FORMAT}, ${RUNS} runs after 2 warm-up requests`);
    console.log(`time to first audio bytes, median: ${result.firstMs.toFixed(1)} ms; whole answer: ${result.totalMs.toFixed(1)} ms (${result.bytes} bytes)`);
    console.log(
      `ratio first ÷ whole: ${result.ratio.toFixed(3)} (spread ${(result.spread * 100).toFixed(1)}%, runs ${result.min.toFixed(3)}-${result.max.toFixed(3)}; goal ≤ 0.5)`,
    );
    await saveResult('speech', { machine, fixture: FIXTURE, format: FORMAT, runs: RUNS, input: INPUT, result, samples: runs });
  } finally {
    await app.close();
  }
}

await main();
