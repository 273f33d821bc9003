/**
 * `lia run`, `lia ps` and `lia stop` as a user runs them: `node bin/lia.js` in a child process,
 * pointed at a test appliance with LIA_URL, LIA_API_KEY and LIA_CA_CERT.
 */
import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { ROOT } from '../helpers/fixtures.js';
import { createModel } from '../helpers/models.js';
import { startEngineAppliance } from './helpers.js';

const app = await startEngineAppliance();
t.teardown(() => app.close());
// A stored num_predict keeps the answers short (the tiny model never ends a ChatML turn by itself).
await createModel(app, 'stories', 'gguf/stories260K-chatml.gguf', { parameters: { num_predict: 24 } });
const caFile = path.join(app.dataDir, 'ca-for-cli.crt');
await writeFile(caFile, app.ca);

/** Runs `lia ...args` with `input` on stdin; resolves with its exit code and output. */
function lia(args: string[], input = ''): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['bin/lia.js', ...args], {
      cwd: ROOT,
      env: { ...process.env, LIA_URL: app.url, LIA_API_KEY: app.key, LIA_CA_CERT: caFile, LIA_FROM_SOURCE: '1' },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(input);
  });
}

t.test('lia run MODEL PROMPT prints one streamed answer; --verbose adds the statistics', async (t) => {
  const r = await lia(['run', 'stories', 'Tell me a story.', '--verbose']);
  t.equal(r.code, 0, r.stderr);
  t.ok(r.stdout.trim().length > 0, `an answer: ${JSON.stringify(r.stdout.slice(0, 80))}`);
  t.match(r.stderr, /eval count:\s+24 token\(s\)/, 'the stored num_predict applies');
  t.match(r.stderr, /eval rate:\s+[\d.]+ tokens\/s/);
  const piped = await lia(['run', 'stories'], 'Once upon a time');
  t.equal(piped.code, 0, 'a prompt piped on stdin');
  t.ok(piped.stdout.trim().length > 0);
});

t.test('lia run -i: an interactive chat driven from stdin', async (t) => {
  const r = await lia(['run', 'stories', '-i'], 'Hello there\n/?\n/clear\n/set system Be kind.\n"""\nTwo\nlines\n"""\n/bye\n');
  t.equal(r.code, 0, r.stderr);
  t.match(r.stdout, /Available Commands/);
  t.match(r.stdout, /Cleared session context/);
  t.match(r.stdout, /Set system message/);
  t.equal(r.stderr, '', 'no errors');
});

t.test('lia ps lists the loaded model; lia stop unloads it', async (t) => {
  const ps = await lia(['ps']);
  t.equal(ps.code, 0);
  t.match(ps.stdout, /^NAME\s+ID\s+SIZE\s+PROCESSOR\s+DEVICE\s+CONTEXT\s+SLOTS\s+QUEUED\s+UNTIL/);
  t.match(ps.stdout, /stories:latest\s+[0-9a-f]{12}\s+[\d.]+ [KMG]?B\s+100% CPU\s+cpu\s+2048\s+0\/\d+\s+0\s+\d+ minutes from now/);
  const stop = await lia(['stop', 'stories']);
  t.equal(stop.code, 0, stop.stderr);
  const after = await lia(['ps']);
  t.notMatch(after.stdout, /stories/);
});

t.test('errors are short messages with a non-zero exit', async (t) => {
  const r = await lia(['run', 'ghost', 'hi']);
  t.equal(r.code, 1);
  t.match(r.stderr, /lia run: 404 .*not found/);
  const usage = await lia(['stop']);
  t.equal(usage.code, 2);
  t.match(usage.stderr, /a model name is required/);
});
