/**
 * Which of LIA's source files one streamed chat request runs through, counted the way V8 counts
 * coverage: the appliance runs in this process, a warm-up request loads the model, then precise
 * coverage (call counts) is reset, one streamed `/v1/chat/completions` (or `/api/chat`) is sent,
 * and every project file with a function called during it is listed. Files of `node_modules` are
 * left out, as are this script and the test client that sends the request (`lia/testing`, the
 * test helpers). The engine's own process
 * (llama-server, or node-llama-cpp's runner) is not counted: this is the appliance's side.
 *
 *   node --conditions=lia-source --import tsx bench/engine/request-path.ts [--surface openai|ollama] [--engine llama-server|llama-cpp] [--model stories260K-chatml] [--functions]
 *
 * `--engine` picks the GGUF engine the model runs on (as `LIA_BACKENDS=gguf=<engine>`); without it,
 * the machine's default (llama-server where it is built). `--functions` also lists, under each
 * file, the functions called in it (with their call counts).
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
    engine: { type: 'string' },
    functions: { type: 'boolean', default: false },
  },
});
const ROOT = path.resolve(import.meta.dirname, '..', '..');
const SELF = new Set([fileURLToPath(import.meta.url)]);

if (values.engine !== undefined && values.engine !== 'llama-server' && values.engine !== 'llama-cpp') {
  throw new Error(`--engine: llama-server or llama-cpp, not ${values.engine}`);
}
const app = await startTestAppliance({
  plugins: { webui: false },
  ...(values.engine ? { env: { LIA_BACKENDS: `gguf=${values.engine}` } } : {}),
});
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
  const files = new Map<string, string[]>();
  for (const script of result) {
    if (!script.url.startsWith('file:')) continue;
    const file = fileURLToPath(script.url);
    if (!file.startsWith(ROOT + path.sep) || file.includes(`${path.sep}node_modules${path.sep}`) || SELF.has(file)) continue;
    if (file.includes(`${path.sep}test${path.sep}helpers${path.sep}`) || file.includes(`${path.sep}core${path.sep}testing${path.sep}`)) continue;
    const called = script.functions.filter((f) => (f.ranges[0]?.count ?? 0) > 0);
    if (script.functions.some((f) => f.ranges.some((r) => r.count > 0))) {
      files.set(
        path.relative(ROOT, file),
        called.map((f) => `${f.functionName || '(anonymous)'} ×${f.ranges[0]?.count}`),
      );
    }
  }
  const sorted = [...files.keys()].sort();
  console.log(
    `a streamed ${values.surface === 'openai' ? '/v1/chat/completions' : '/api/chat'} request on ${values.model}${values.engine ? ` (engine ${values.engine})` : ''} (${body.split('\n').filter(Boolean).length} lines back)`,
  );
  console.log(`runs through ${sorted.length} LIA source files in the appliance's process:`);
  for (const f of sorted) {
    console.log(`  ${f}`);
    if (values.functions) for (const fn of files.get(f) ?? []) console.log(`      ${fn}`);
  }
} finally {
  session.disconnect();
  await app.close();
}
