/**
 * Which of LIA's source files one streamed chat request runs through, counted the way V8 counts
 * coverage: the appliance runs in this process, a warm-up request loads the model, then precise
 * coverage (call counts) is reset, one streamed `/v1/chat/completions` (or `/api/chat`) is sent,
 * and every project file with a function called during it is listed. Files of `node_modules` are
 * left out, as are this script and the test client that sends the request (`lia/testing`, the
 * test helpers). The engine's own process
 * (llama-server, or node-llama-cpp's runner) is not counted: this is the appliance's side.
 *
 *   node --conditions=lia-source --import tsx bench/engine/request-path.ts [--surface openai|ollama] [--model stories260K-chatml]
 *
 * @module
 */
import { Session } from 'node:inspector/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { startTestAppliance } from 'lia/testing';
import { createModel } from '../../test/helpers/models.js';

const { values } = parseArgs({
  options: {
    surface: { type: 'string', default: 'openai' },
    model: { type: 'string', default: 'stories260K-chatml' },
  },
});
const ROOT = path.resolve(import.meta.dirname, '..', '..');
const SELF = new Set([fileURLToPath(import.meta.url)]);

const app = await startTestAppliance({ plugins: { webui: false } });
const session = new Session();
session.connect();
try {
  await createModel(app, 'path', `gguf/${values.model}.gguf`);
  const send = async (): Promise<string> => {
    const openai = values.surface === 'openai';
    const res = await app.fetch(openai ? '/v1/chat/completions' : '/api/chat', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'path',
        messages: [{ role: 'user', content: 'Once upon a time' }],
        stream: true,
        ...(openai ? { max_tokens: 8, temperature: 0 } : { options: { num_predict: 8, temperature: 0 } }),
      }),
    });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${text}`);
    return text;
  };
  await send();
  await session.post('Profiler.enable');
  await session.post('Profiler.startPreciseCoverage', { callCount: true, detailed: false });
  await session.post('Profiler.takePreciseCoverage'); // resets the counts: the warm-up is not counted
  const body = await send();
  const { result } = await session.post('Profiler.takePreciseCoverage');
  await session.post('Profiler.stopPreciseCoverage');
  const files = new Set<string>();
  for (const script of result) {
    if (!script.url.startsWith('file:')) continue;
    const file = fileURLToPath(script.url);
    if (!file.startsWith(ROOT + path.sep) || file.includes(`${path.sep}node_modules${path.sep}`) || SELF.has(file)) continue;
    if (file.includes(`${path.sep}test${path.sep}helpers${path.sep}`) || file.includes(`${path.sep}core${path.sep}testing${path.sep}`)) continue;
    if (script.functions.some((f) => f.ranges.some((r) => r.count > 0))) files.add(path.relative(ROOT, file));
  }
  const sorted = [...files].sort();
  console.log(
    `a streamed ${values.surface === 'openai' ? '/v1/chat/completions' : '/api/chat'} request on ${values.model} (${body.split('\n').filter(Boolean).length} lines back)`,
  );
  console.log(`runs through ${sorted.length} LIA source files in the appliance's process:`);
  for (const f of sorted) console.log(`  ${f}`);
} finally {
  session.disconnect();
  await app.close();
}
