/**
 * A stream's head and its first frames leave together: everything written before the microtask
 * queue drains is held back (corked), and what comes in a later event-loop turn goes straight out.
 */
import type { ServerResponse } from 'node:http';
import t from 'tap';
import { holdFirstTurn } from '../../core/http/streaming.js';

/** Records cork, uncork and write calls as Node's response would receive them. */
function recorder(): { res: ServerResponse; log: string[] } {
  const log: string[] = [];
  const res = {
    cork: () => log.push('cork'),
    uncork: () => log.push('uncork'),
    write: (s: string) => log.push(`write ${s}`),
  } as unknown as ServerResponse;
  return { res, log };
}

t.test('frames written in the first turn share one uncork; later frames come after it', async (t) => {
  const { res, log } = recorder();
  // As in a route: after awaiting the primed first event, the stream starts and writes a chunk or
  // two, each a few microtasks apart.
  await Promise.resolve();
  holdFirstTurn(res);
  await Promise.resolve();
  res.write('role');
  await Promise.resolve();
  await Promise.resolve();
  res.write('token 1');
  // The uncork comes as soon as the microtasks are done, before anything queued after it (a
  // `setImmediate` would have waited for the next event-loop turn).
  process.nextTick(() => log.push('next tick'));
  await new Promise((r) => setImmediate(r));
  res.write('token 2');
  t.same(log, ['cork', 'write role', 'write token 1', 'uncork', 'next tick', 'write token 2']);
});

t.test('nothing written in the first turn: the head is released all the same', async (t) => {
  const { res, log } = recorder();
  holdFirstTurn(res);
  await new Promise((r) => setImmediate(r));
  t.same(log, ['cork', 'uncork']);
});
