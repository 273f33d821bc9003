/**
 * An engine that cannot run a model on this CPU never takes the model down (docs/backends.md,
 * "When an engine dies"). Stand-ins for llama-server, shell scripts that die of SIGILL the way the
 * AMX build did, show each path a user meets:
 * - a binary that passes the engine probe but dies loading a user's model: the load is tried twice,
 *   then node-llama-cpp serves the model, with a warning, a metric and `/api/ps` naming the engine;
 * - a binary that dies on the probe too: it is never given a model, and a model pinned to it is a
 *   503 in the surface's format, one line, no log, no path;
 * - a build whose best CPU variant dies on the probe: the variant is left out and the next one runs.
 * The probe and `lia engine build --check` also run on the real binary.
 */
import { spawn } from 'node:child_process';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { cachedBinary, settleVariants } from '../../plugins/backend-llama-server/build.js';
import { runProbe } from '../../plugins/backend-llama-server/probe.js';
import { requireLlamaServer } from '../helpers/engines.js';
import { ROOT } from '../helpers/fixtures.js';
import { createModel } from '../helpers/models.js';
import { startEngineAppliance } from '../engine/helpers.js';

requireLlamaServer();
const real = (await cachedBinary())!;
const dir = await mkdtemp(path.join(os.tmpdir(), 'lia-crash-'));
t.teardown(() => rm(dir, { recursive: true, force: true }));

/** What llama-server prints at verbosity 4 when it runs the sapphirerapids (AMX) CPU variant. */
const AMX_SYSTEM_INFO =
  'common_param: system_info: n_threads = 2 (n_threads_batch = 2) / 2 | CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | AVX512 = 1 | AVX512_VBMI = 1 | AVX512_VNNI = 1 | AVX512_BF16 = 1 | AMX_INT8 = 1 | LLAMAFILE = 1 | REPACK = 1 |';

/**
 * A stand-in llama-server at `file`: for the probe model (`probe.gguf`) it runs the real binary
 * when `passesProbe`; for any other model (or the probe, when not) it prints the AMX variant's
 * features, logs the model's path, appends the path to `calls`, and dies of SIGILL.
 */
async function standIn(file: string, calls: string, passesProbe: boolean): Promise<void> {
  await writeFile(
    file,
    `#!/bin/sh
prev=; model=
for a in "$@"; do [ "$prev" = --model ] && model="$a"; prev="$a"; done
${passesProbe ? `case "$model" in */probe.gguf) exec '${real}' "$@";; esac\n` : ''}echo '${AMX_SYSTEM_INFO}' >&2
echo "llama_model_load: loading model from $model" >&2
echo "$model" >> '${calls}'
kill -ILL $$
`,
  );
  await chmod(file, 0o755);
}

const lines = async (file: string) => (existsSync(file) ? (await readFile(file, 'utf8')).split('\n').filter(Boolean) : []);

t.test('a binary that dies loading a model: tried twice, then node-llama-cpp serves it, and says so', async (t) => {
  const binary = path.join(dir, 'dies-at-load');
  const calls = path.join(dir, 'dies-at-load.calls');
  await standIn(binary, calls, true);
  const app = await startEngineAppliance({
    plugins: { 'backend-llama-server': { options: { binary, cacheDir: path.join(dir, 'cache-at-load') } }, 'host-services': true },
    env: { LIA_LOG_LEVEL: 'warn' },
  });
  t.teardown(() => app.close());
  await createModel(app, 'stories', 'gguf/stories260K.gguf');

  const chat = (content: string) =>
    app.fetch('/api/chat', {
      method: 'POST',
      body: JSON.stringify({ model: 'stories', stream: false, messages: [{ role: 'user', content }], options: { num_predict: 3 } }),
    });
  const res = await chat('Once upon a time');
  t.equal(res.status, 200, 'the user gets an answer');
  t.match(await res.json(), { done: true, message: { role: 'assistant' } });
  t.equal((await lines(calls)).length, 2, 'llama-server was tried twice on the model');

  const ps = (await (await app.fetch('/api/ps')).json()) as { models: Array<{ name: string; engine: string }> };
  t.match(ps.models, [{ name: 'stories:latest', engine: 'llama-cpp' }], '/api/ps names the engine that serves it');

  const metrics = await (await app.fetch('/metrics')).text();
  t.match(metrics, /lia_engine_fallbacks_total\{model="stories:latest",engine="llama-server",signal="SIGILL"\} 1/);

  const logs = (await (await app.fetch('/system/logs?service=svc-inference&lines=200')).json()) as { lines: Array<{ message: string; priority: number }> };
  t.ok(
    logs.lines.some((l) => l.priority === 4 && /engine llama-server died of SIGILL loading stories:latest twice; loading it on llama-cpp/.test(l.message)),
    'a warning names the engine, the signal and where the model went',
  );

  await app.fetch('/api/generate', { method: 'POST', body: JSON.stringify({ model: 'stories', keep_alive: 0 }) }).then((r) => r.arrayBuffer());
  t.equal((await chat('again')).status, 200);
  t.equal((await lines(calls)).length, 2, 'its next load goes to node-llama-cpp at once');
});

t.test('a binary that dies on the probe: never given a model; one pinned to it is a clean 503', async (t) => {
  const binary = path.join(dir, 'dies-always');
  const calls = path.join(dir, 'dies-always.calls');
  await standIn(binary, calls, false);
  const probe = await runProbe(binary);
  t.match(probe, { ok: false, signal: 'SIGILL', variant: 'libggml-cpu-sapphirerapids.so' });
  t.match(probe.message, /^llama-server \(libggml-cpu-sapphirerapids\.so\) dies of SIGILL computing a quantized model on this CPU$/);

  const calledBefore = (await lines(calls)).length;
  const cache = path.join(dir, 'cache-always');
  const app = await startEngineAppliance({
    plugins: { 'backend-llama-server': { options: { binary, cacheDir: cache } } },
    env: { LIA_BACKENDS: 'pinned:latest=llama-server' },
  });
  t.teardown(() => app.close());
  await createModel(app, 'stories', 'gguf/stories260K.gguf');
  await createModel(app, 'pinned', 'gguf/stories260K.gguf');
  const res = await app.fetch('/api/generate', {
    method: 'POST',
    body: JSON.stringify({ model: 'stories', prompt: 'Hi', stream: false, options: { num_predict: 2 } }),
  });
  t.equal(res.status, 200, 'text runs on node-llama-cpp');
  await res.arrayBuffer();
  t.equal((await lines(calls)).length, calledBefore + 1, 'the appliance ran the binary once, for the probe, never for the model');

  const pinned = await app.fetch('/api/chat', { method: 'POST', body: JSON.stringify({ model: 'pinned', messages: [{ role: 'user', content: 'Hi' }] }) });
  t.equal(pinned.status, 503);
  const body = (await pinned.json()) as { error: string };
  t.match(body, { error: /^llama-server cannot compute on this machine's CPU \(SIGILL\); see the log$/ }, "Ollama's error format, one line, no path");
  t.equal((await lines(calls)).length, calledBefore + 1, 'and not again for the pinned model');
});

t.test('a build whose best CPU variant dies on the probe leaves it out, and the next variant runs', async (t) => {
  const build = path.join(dir, 'build');
  const bin = path.join(build, 'build', 'bin');
  await mkdir(bin, { recursive: true });
  const variant = path.join(bin, 'libggml-cpu-sapphirerapids.so');
  await writeFile(variant, 'not a library');
  const binary = path.join(bin, 'llama-server');
  await writeFile(
    binary,
    `#!/bin/sh
if [ -e '${variant}' ]; then echo '${AMX_SYSTEM_INFO}' >&2; kill -ILL $$; fi
exec '${real}' "$@"
`,
  );
  await chmod(binary, 0o755);
  const steps: string[] = [];
  const probe = await settleVariants({ binary, dir: build, log: path.join(build, 'build.log') }, (p) => p.kind === 'step' && steps.push(p.text));
  t.ok(probe.ok, probe.message);
  t.notOk(existsSync(variant), 'the variant that died is gone from the build');
  t.equal(await readFile(path.join(build, 'left-out'), 'utf8'), 'libggml-cpu-sapphirerapids.so SIGILL\n');
  t.match(steps.join('\n'), /libggml-cpu-sapphirerapids\.so\) dies of SIGILL .*: left out of this build/);
});

t.test('the real binary computes the probe model, and lia engine build --check says with which variant', async (t) => {
  const probe = await runProbe(real);
  t.match(probe, { ok: true, signal: null, variant: /^libggml-cpu-[\w.-]+\.so$/ });
  const child = spawn(process.execPath, [path.join(ROOT, 'bin/lia.js'), 'engine', 'build', '--check'], {
    env: { ...process.env, LIA_FROM_SOURCE: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  t.equal(code, 0, err);
  t.equal(out, `${real}\n`, 'stdout is the binary alone (the Debian build reads it)');
  t.match(err, new RegExp(`computes Q4_0, Q8_0 and F16 matrices on this CPU with ${probe.variant!.replace(/\./g, '\\.')}`));
});
