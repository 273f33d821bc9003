/**
 * The download retry policy (registry/retry.ts): which failures are retried, and the wait before
 * the next attempt, which an abort ends and which leaves nothing on the download's signal.
 */
import { getEventListeners } from 'node:events';
import t from 'tap';
import { Errors } from '../../core/index.js';
import { backoff, retryable } from '../../plugins/model-store/registry/retry.js';

t.test('network failures, stalls and 5xx are retried; a full disk, a 4xx or an abort are not', async (t) => {
  t.equal(retryable(Object.assign(new Error('reset'), { code: 'ECONNRESET' })), true);
  t.equal(retryable(Object.assign(new Error('stalled'), { code: 'LIA_STALL' })), true);
  t.equal(retryable(Errors.badGateway('registry answered 503')), true);
  t.equal(retryable(Object.assign(new Error('full'), { code: 'ENOSPC' })), false);
  t.equal(retryable(Errors.badRequest('bad name')), false);
  t.equal(retryable(Object.assign(new Error('aborted'), { code: 'ABORT_ERR' })), false);
});

t.test('each wait removes its abort listener when it ends; an abort ends a wait at once', async (t) => {
  const ctl = new AbortController();
  for (let i = 0; i < 3; i++) await backoff(0, ctl.signal);
  t.equal(getEventListeners(ctl.signal, 'abort').length, 0, 'no listener left after three waits');
  const waiting = backoff(10, ctl.signal); // 4 s
  let settled = false;
  waiting.catch(() => (settled = true));
  ctl.abort(new Error('gone'));
  // One turn of the event loop, far less than the wait's timer: the abort itself ended it.
  await new Promise((r) => setImmediate(r));
  t.ok(settled, 'the abort ended the wait at once');
  await t.rejects(waiting, { message: 'gone' });
});
