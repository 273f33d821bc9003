/**
 * A named key's `concurrent_streams` limit as clients see it: while the key's one allowed answer
 * streams, its next inference request is a 429 with Retry-After in each surface's shape, other keys
 * are not held to it, and once the stream ends the key is admitted again. (A client that leaves:
 * key-streams.e2e.test.ts, which needs a real connection to close.)
 */
import t from 'tap';
import { json, startKeyStreams } from './key-streams-setup.js';

const { app, key, chat, openStream } = await startKeyStreams(false);

t.test('a second stream of the key waits its turn: 429 with Retry-After, on /api and /v1', async (t) => {
  const first = await openStream(t);
  const again = await chat(key, { prompt: 'hi' });
  t.equal(again.status, 429, 'the second concurrent request is refused');
  t.ok(Number(again.headers.get('retry-after')) >= 1, 'with Retry-After');
  t.match(await again.json(), { error: /1 concurrent streams/ });
  const v1 = await app.fetch('/v1/chat/completions', {
    method: 'POST',
    headers: { ...json, authorization: `Bearer ${key}` },
    body: JSON.stringify({ model: 'parrot', messages: [{ role: 'user', content: 'hi' }] }),
  });
  t.equal(v1.status, 429);
  t.match(await v1.json(), { error: { message: /concurrent streams/ } }, 'in the OpenAI format');
  const master = await chat(null, { prompt: 'hi' });
  t.equal(master.status, 200, 'the master key is not held to the named key’s limit');
  await master.text();

  const whole = await first.rest;
  t.match(whole, /"done":true/, 'the first stream finished');
  const after = await chat(key, { prompt: 'hi' });
  t.equal(after.status, 200, 'the key is admitted again once its stream ended');
  await after.text();
});
