/**
 * A named key's `concurrent_streams` limit when its client leaves mid-stream, which needs a real
 * connection to close: the key is admitted again, and the cut stream is counted in usage with the
 * tokens it produced. (The limit itself: key-streams.route.test.ts.)
 */
import t from 'tap';
import { json, startKeyStreams } from './key-streams-setup.js';

const { app, key, chat, openStream } = await startKeyStreams(true);

t.test('a client that leaves frees the key’s stream', async (t) => {
  const abort = new AbortController();
  const first = await openStream(t, abort.signal);
  abort.abort();
  await first.rest.catch(() => undefined);
  // The server notices the closed connection and releases the stream; poll for it, never sleep.
  const deadline = Date.now() + 10_000;
  let status = 0;
  while (Date.now() < deadline) {
    const res = await chat(key, { prompt: 'hi' });
    status = res.status;
    await res.text();
    if (status === 200) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  t.equal(status, 200, 'admitted again after the client went away');
});

t.test('a stream its client cuts is counted in usage with the tokens it produced', async (t) => {
  const made = await app.fetch('/system/api-keys', { method: 'POST', headers: json, body: JSON.stringify({ name: 'cutter', scopes: ['inference'] }) });
  const { key: cutter } = (await made.json()) as { key: string };
  const abort = new AbortController();
  const res = await app.fetch('/api/chat', {
    method: 'POST',
    headers: { ...json, authorization: `Bearer ${cutter}` },
    body: JSON.stringify({ model: 'parrot', messages: [{ role: 'user', content: 'one two three four five six seven eight' }] }),
    signal: abort.signal,
  });
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  let lines = 0;
  while (lines < 3) {
    const { value, done } = await reader.read();
    if (done) break;
    lines += new TextDecoder().decode(value).split('\n').filter(Boolean).length;
  }
  abort.abort();
  type Usage = { keys: Array<{ name: string; requests: number; prompt_tokens: number; completion_tokens: number }> };
  const counted = async () => ((await (await app.fetch('/system/usage')).json()) as Usage).keys.find((k) => k.name === 'cutter');
  const deadline = Date.now() + 10_000;
  let usage = await counted();
  while ((usage?.completion_tokens ?? 0) === 0 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
    usage = await counted();
  }
  t.equal(usage?.requests, 1);
  t.ok((usage?.completion_tokens ?? 0) >= 3, `the tokens sent before the cut are counted (${usage?.completion_tokens})`);
  t.ok((usage?.prompt_tokens ?? 0) > 0, 'and the prompt');
});
