/**
 * The appliance of the `concurrent_streams` tests (key-streams.route and key-streams.e2e): the
 * fake backend answering a word every 100 ms, so a first stream is still going when the second
 * request arrives; a key allowed one stream at a time; a chat call and a stream opener for it.
 */
import t, { type Test } from 'tap';
import { createFakeModel, startTestAppliance, type TestAppliance } from '../../core/testing/index.js';
import { readUntil } from '../helpers/stream-reader.js';
import { fakeBackendOnly } from '../helpers/plugin-sets.js';

export const json = { 'content-type': 'application/json' };

export interface KeyStreams {
  app: TestAppliance;
  /** The key allowed one concurrent stream. */
  key: string;
  chat(k: string | null, init?: { signal?: AbortSignal; prompt?: string }): Promise<Response>;
  /** Opens a streamed chat with `key` and resolves once its first line has arrived. */
  openStream(t: Test, signal?: AbortSignal): Promise<{ rest: Promise<string> }>;
}

/** Starts the appliance (closed in the file's teardown); `listen: false` for the route tier. */
export async function startKeyStreams(listen: boolean): Promise<KeyStreams> {
  const app = await startTestAppliance({
    listen,
    plugins: fakeBackendOnly({ tokenDelayMs: 100 }),
  });
  t.teardown(() => app.close());
  await createFakeModel(app, 'parrot', 'parrot says:');
  const created = await app.fetch('/system/api-keys', {
    method: 'POST',
    headers: json,
    body: JSON.stringify({ name: 'one-at-a-time', scopes: ['inference'], limits: { concurrent_streams: 1 } }),
  });
  if (created.status !== 201) throw new Error(`creating the key: ${created.status} ${await created.text()}`);
  const { key } = (await created.json()) as { key: string };

  const chat: KeyStreams['chat'] = (k, init = {}) =>
    app.fetch('/api/chat', {
      method: 'POST',
      headers: { ...json, ...(k ? { authorization: `Bearer ${k}` } : {}) },
      body: JSON.stringify({ model: 'parrot', messages: [{ role: 'user', content: init.prompt ?? 'one two three four five six seven eight' }] }),
      ...(init.signal ? { signal: init.signal } : {}),
    }) as unknown as Promise<Response>;

  const openStream: KeyStreams['openStream'] = async (t, signal) => {
    const res = await chat(key, signal ? { signal } : {});
    t.equal(res.status, 200, 'the first stream is admitted');
    const rest = await readUntil(res.body as ReadableStream<Uint8Array>, /\n/);
    return { rest: rest() };
  };
  return { app, key, chat, openStream };
}
