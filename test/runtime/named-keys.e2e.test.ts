/**
 * `lia key create|list|revoke|rotate NAME` against a running appliance: the CLI is a process that
 * reaches the API through `LIA_URL`. (Named keys through the API: named-keys.route.test.ts.)
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { createFakeModel, startTestAppliance } from '../../core/testing/index.js';
import { fakeBackendOnly } from '../helpers/plugin-sets.js';

const run = promisify(execFile);
const json = { 'content-type': 'application/json' };
const bearer = (key: string) => ({ ...json, authorization: `Bearer ${key}` });

const dataDir = await mkdtemp(path.join(os.tmpdir(), 'lia-named-keys-'));
t.teardown(() => rm(dataDir, { recursive: true, force: true }));
const app = await startTestAppliance({
  dataDir,
  plugins: fakeBackendOnly(),
});
t.teardown(() => app.close());
await createFakeModel(app, 'parrot', 'parrot says:');

t.test('lia key create | list | rotate NAME | revoke', async (t) => {
  const caFile = path.join(dataDir, 'ca.crt');
  await writeFile(caFile, app.ca);
  const env = { ...process.env, LIA_URL: app.url, LIA_API_KEY: app.key, LIA_CA_CERT: caFile };
  const lia = (...args: string[]) => run(process.execPath, ['bin/lia.js', 'key', ...args], { env });

  const created = await lia('create', 'cli-bot', '--scope', 'inference', '--scope', 'models:read', '--model', 'parrot', '--rpm', '60', '--expires', '7d');
  const key = created.stdout.trim();
  t.match(key, /^lia_[A-Za-z0-9_-]{43}_[0-9A-Za-z]{6}$/, 'stdout is the secret alone');
  t.equal((await app.fetch('/api/tags', { headers: bearer(key) })).status, 200, 'the new key works');

  const listed = await lia('list');
  t.match(listed.stdout, /^NAME\s+HINT\s+SCOPES/);
  t.match(listed.stdout, /cli-bot\s+lia_..…..\s+inference,models:read\s+parrot\s+20/);
  t.notMatch(listed.stdout, key.slice(4, 20), 'no secret in the list');

  const rotated = (await lia('rotate', 'cli-bot')).stdout.trim();
  t.not(rotated, key);
  t.equal((await app.fetch('/api/tags', { headers: bearer(key) })).status, 401, 'rotated: the old secret is refused');

  await lia('revoke', 'cli-bot');
  t.equal((await app.fetch('/api/tags', { headers: bearer(rotated) })).status, 401, 'revoked');
  const again = await lia('revoke', 'cli-bot').then(
    () => null,
    (err: { code: number; stderr: string }) => err,
  );
  t.equal(again?.code, 1, 'a second revoke fails');
  t.match(again?.stderr, /404 no API key named "cli-bot"/, "with the server's message");
});
