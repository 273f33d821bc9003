/**
 * Time to first token with one image: the appliance (its own `lia serve` process, HTTPS, a key)
 * serving a vision model (the tiny vision fixture's language model and a projector, `--projector` below; created through `/api/create` with
 * the projector as a second file; the backend-llama-server plugin runs it on llama-server with
 * `--mmproj`) against llama-server started directly on the same two files with the same threads,
 * slots, context per slot and batch size, and the flags the appliance gives its own server
 * (`--jinja`, `--no-kv-unified`, `--cache-ram 0`, `--reasoning-format none`), so that the ratio
 * is the appliance's own layer: TLS, the key check, routing, the scheduler and the loopback hop.
 *
 * Each request is a streamed `/v1/chat/completions` with one text part and one image (a PNG data
 * URL, `--size` pixels square, of a colour no earlier request had, so that no cache holds it on
 * either side) and `max_tokens: 1`. Time to first token is taken on the client (undici's
 * `request` over open connections, bench/lib/connections.ts): from the request's send to the
 * first event carrying the token or the end of the answer (a chunk that announces only the
 * role does not count). The two servers' rounds are interleaved, the order alternating;
 * each round sends `--per-round` requests to each side and keeps the median, and the ratio of a
 * round is llama-server's median ÷ the appliance's (≥ 1.0: the appliance is as fast or faster).
 * The result is the median over the rounds, with the smallest and largest round ratio.
 *
 * Run: `node --conditions=lia-source --import tsx bench/images/ttft.ts [--rounds 20] [--per-round 3] [--size 64] [--slots 1] [--context 1024] [--projector bench|tiny]`
 * (needs `npm run fixtures` and `lia engine build`; both are built here on first use otherwise).
 * Prints the machine first and the table last, and writes `bench/results/images-ttft-<time>.json`.
 *
 * @module
 */
import os from 'node:os';
import { parseArgs } from 'node:util';
import type { Dispatcher } from 'undici';
import { builtFixture } from '../../scripts/fixtures/build.js';
import { solidPng } from '../../test/backend-llama-server/images.js';
import { uploadBlob } from '../../test/helpers/models.js';
import { ENGINE_ONLY } from '../../test/helpers/plugin-sets.js';
import { saveResult } from '../lib/results.js';
import { startApplianceProcess, freePort } from '../lib/appliance-process.js';
import { countConnections, keepAlivePool, resent, timedPost } from '../lib/connections.js';
import { assertSameConfiguration, machineInfo, machineLine } from '../lib/machine.js';
import { median } from '../lib/stats.js';
import { amxNote, benchThreads, buildLlamaServer, startLlamaServer } from '../engine/llama-server.js';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '20' },
    'per-round': { type: 'string', default: '3' },
    size: { type: 'string', default: '64' },
    slots: { type: 'string', default: '1' },
    context: { type: 'string', default: '1024' },
    projector: { type: 'string', default: 'bench' },
  },
});
/**
 * The projector: `bench` (the default), bench-vision-mmproj.gguf at CLIP ViT-B/16's size (196
 * embeddings per image, encoding as long as a real base-size projector's); `tiny`, the test
 * fixture's 16-embedding toy, where a request's fixed costs outweigh the image's work.
 */
const PROJECTOR = values.projector === 'tiny' ? 'tiny-vision-mmproj.gguf' : 'bench-vision-mmproj.gguf';
const ROUNDS = Number(values.rounds);
const PER_ROUND = Number(values['per-round']);
const SIZE = Number(values.size);
const SLOTS = Number(values.slots);
const CONTEXT = Number(values.context);
const BATCH = 512;
const { threads: THREADS, batchThreads: BATCH_THREADS } = benchThreads();

let colour = 0;
/** A PNG data URL of a colour no earlier call returned (16.7 million before one repeats). */
function freshImage(): string {
  const n = (colour++ * 2_654_435_761) >>> 8;
  return `data:image/png;base64,${solidPng(SIZE, SIZE, [n & 255, (n >> 8) & 255, (n >> 16) & 255]).toString('base64')}`;
}

/** The request both servers get (llama-server ignores `model`). */
const body = (image: string): string =>
  JSON.stringify({
    model: 'vision',
    stream: true,
    max_tokens: 1,
    temperature: 0.8,
    seed: 42,
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'What is in this image?' },
          { type: 'image_url', image_url: { url: image } },
        ],
      },
    ],
  });

/**
 * One streamed chat with `image`, timed from its send to the first SSE event that carries text
 * or a finish reason; the rest of the answer is read before returning.
 */
async function firstToken(url: string, dispatcher: Dispatcher, headers: Record<string, string>, image: string): Promise<number> {
  const { res, t0 } = await timedPost(url, { dispatcher, headers, body: body(image) });
  if (res.statusCode !== 200) throw new Error(`${url}: HTTP ${res.statusCode}: ${await res.body.text()}`);
  let first = 0;
  let buffer = '';
  const decoder = new TextDecoder();
  for await (const chunk of res.body as AsyncIterable<Buffer>) {
    buffer += decoder.decode(chunk, { stream: true });
    let nl: number;
    while ((nl = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, nl).trim();
      buffer = buffer.slice(nl + 1);
      if (first || !line.startsWith('data: ') || line === 'data: [DONE]') continue;
      const event = JSON.parse(line.slice(6)) as { choices?: Array<{ delta?: { content?: string | null }; finish_reason?: string | null }>; error?: unknown };
      if (event.error) throw new Error(`${url}: ${JSON.stringify(event.error)}`);
      const choice = event.choices?.[0];
      if (choice?.delta?.content || choice?.finish_reason) first = performance.now();
    }
  }
  if (!first) throw new Error(`${url}: the answer carried no token and no finish reason`);
  return first - t0;
}

interface Side {
  name: 'appliance' | 'llama-server';
  ttft(image: string): Promise<number>;
}

async function main(): Promise<void> {
  const machine = machineInfo();
  console.log(machineLine(machine));
  const model = await builtFixture('tiny-vision.gguf', console.error);
  const projector = await builtFixture(PROJECTOR, console.error);
  const binary = await buildLlamaServer();
  const port = await freePort();
  const server = await startLlamaServer(binary, {
    model,
    port,
    threads: THREADS,
    batchThreads: BATCH_THREADS,
    parallel: SLOTS,
    contextPerSlot: CONTEXT,
    jinja: true,
    args: ['--mmproj', projector, '--no-kv-unified', '--cache-ram', '0', '--reasoning-format', 'none'],
  });
  const app = await startApplianceProcess({
    plugins: {
      ...ENGINE_ONLY,
      'api-openai': true,
      engine: { options: { numParallel: SLOTS, contextLength: CONTEXT, threads: THREADS, batchThreads: BATCH_THREADS, keepAlive: -1 } },
      'backend-llama-server': { options: { batchSize: BATCH } },
    },
  });
  const plain = keepAlivePool(`http://127.0.0.1:${port}`);
  try {
    const files = { 'tiny-vision.gguf': await uploadBlob(app, model), [PROJECTOR]: await uploadBlob(app, projector) };
    const created = await app.fetch('/api/create', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'vision', files, stream: false }),
    });
    if (created.status !== 200) throw new Error(`creating the vision model: ${created.status} ${await created.text()}`);
    await created.text();

    const appliance: Side = {
      name: 'appliance',
      ttft: (image) => firstToken(`${app.url}/v1/chat/completions`, app.dispatcher(), { authorization: `Bearer ${app.key}` }, image),
    };
    const llamaServer: Side = { name: 'llama-server', ttft: (image) => firstToken(`http://127.0.0.1:${port}/v1/chat/completions`, plain, {}, image) };

    // Warm both (the appliance loads the model on its first request), then a pause: the appliance
    // starts a spare runner once it has been quiet for a second, which must land in no timing.
    for (const side of [appliance, llamaServer]) for (let i = 0; i < 3; i++) await side.ttft(freshImage());
    await new Promise((resolve) => setTimeout(resolve, 4000));

    const ps = (await (await app.fetch('/api/ps')).json()) as { models: { name: string; context_length?: number }[] };
    const props = (await (await fetch(`http://127.0.0.1:${port}/props`)).json()) as {
      total_slots?: number;
      default_generation_settings?: { n_ctx?: number };
      modalities?: { vision?: boolean };
    };
    assertSameConfiguration([
      {
        name: 'context per slot',
        wanted: CONTEXT,
        sides: { appliance: ps.models.find((m) => m.name.startsWith('vision'))?.context_length, 'llama-server': props.default_generation_settings?.n_ctx },
      },
      { name: 'slots', wanted: SLOTS, sides: { 'llama-server': props.total_slots } },
      { name: 'vision (1 = the projector loaded)', wanted: 1, sides: { 'llama-server': props.modalities?.vision ? 1 : 0 } },
    ]);

    const connections = countConnections();
    connections.on = true;
    const rounds: Array<{ appliance: number; 'llama-server': number; ratio: number }> = [];
    for (let r = 0; r < ROUNDS; r++) {
      const images = Array.from({ length: PER_ROUND }, freshImage);
      const round = { appliance: 0, 'llama-server': 0, ratio: 0 };
      for (const side of r % 2 === 0 ? [appliance, llamaServer] : [llamaServer, appliance]) {
        const times: number[] = [];
        for (const image of images) times.push(await side.ttft(image));
        round[side.name] = median(times);
      }
      round.ratio = round['llama-server'] / round.appliance;
      rounds.push(round);
      console.error(
        `round ${r + 1}/${ROUNDS}: appliance ${round.appliance.toFixed(2)} ms, llama-server ${round['llama-server'].toFixed(2)} ms, ratio ${round.ratio.toFixed(3)}`,
      );
    }
    connections.on = false;
    connections.stop();

    const ratios = rounds.map((x) => x.ratio);
    const result = {
      appliance: median(rounds.map((x) => x.appliance)),
      llamaServer: median(rounds.map((x) => x['llama-server'])),
      ratio: median(ratios),
      min: Math.min(...ratios),
      max: Math.max(...ratios),
    };
    console.log(
      `\n${machineLine(machine)}; load ${os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(' / ')} after the run`,
    );
    console.log(
      `tiny-vision (+ projector), ${SIZE}x${SIZE} PNG per request, max_tokens 1, threads ${THREADS} (batches ${BATCH_THREADS}), ${SLOTS} slot(s) × ${CONTEXT} context, ${ROUNDS} rounds × ${PER_ROUND} requests per side`,
    );
    const amx = amxNote();
    if (amx) console.log(`WARNING: ${amx}`);
    console.log(`${PROJECTOR}: time to first token, median (ms): appliance ${result.appliance.toFixed(2)}, llama-server ${result.llamaServer.toFixed(2)}`);
    console.log(`ratio llama-server ÷ appliance: ${result.ratio.toFixed(3)} (rounds ${result.min.toFixed(3)}-${result.max.toFixed(3)}; goal ≥ 0.95)`);
    console.log(`connections opened while timing: ${JSON.stringify(connections.opened)}; requests sent again (timedPost): ${JSON.stringify(resent)}`);
    await saveResult('images-ttft', {
      machine,
      threads: THREADS,
      batchThreads: BATCH_THREADS,
      slots: SLOTS,
      context: CONTEXT,
      size: SIZE,
      projector: PROJECTOR,
      perRound: PER_ROUND,
      result,
      rounds,
    });
  } finally {
    await plain.close();
    await app.close();
    server.kill();
  }
}

await main();
process.exit(0);
