/**
 * A named key's limits as its holder meets them over time (the clock is passed in, so minutes pass
 * instantly): a minute's allowance in a burst, then one request back every 60/N seconds; tokens
 * spent after the fact block new inference until earned back; concurrent streams free up when a
 * stream ends. Each refusal is a 429 whose Retry-After says when to come back.
 */
import t from 'tap';
import { KeyLimiter } from '../../plugins/auth-api-key/rate-limits.js';

const refusal = (fn: () => unknown): { statusCode: number; retryAfter: number } | null => {
  try {
    fn();
    return null;
  } catch (err) {
    const e = err as { statusCode: number; headers: Record<string, string> };
    return { statusCode: e.statusCode, retryAfter: Number(e.headers['Retry-After']) };
  }
};

t.test('requests per minute', async (t) => {
  const limiter = new KeyLimiter({ requests_per_minute: 6 }, 0);
  for (let i = 0; i < 6; i++) t.equal(refusal(() => limiter.request(0)), null, `request ${i + 1} of the burst`);
  t.same(refusal(() => limiter.request(0)), { statusCode: 429, retryAfter: 10 }, 'the 7th waits one refill: 10 s');
  t.same(refusal(() => limiter.request(9_000)), { statusCode: 429, retryAfter: 1 }, 'at 9 s: 1 s to go');
  t.equal(refusal(() => limiter.request(10_000)), null, 'at 10 s one request is back');
  t.ok(refusal(() => limiter.request(10_000)), 'and only one');
});

t.test('tokens per minute', async (t) => {
  const limiter = new KeyLimiter({ tokens_per_minute: 60 }, 0);
  const release = limiter.admit(0);
  release();
  limiter.spendTokens(90, 0);
  t.same(refusal(() => limiter.admit(0)), { statusCode: 429, retryAfter: 30 }, '30 tokens in debt at 1 per second: 30 s');
  t.ok(refusal(() => limiter.admit(30_000)), 'at exactly zero: still refused');
  t.equal(refusal(() => limiter.admit(31_000)), null, 'once positive, admitted');
});

t.test('concurrent streams', async (t) => {
  const limiter = new KeyLimiter({ concurrent_streams: 2 });
  const a = limiter.admit();
  const b = limiter.admit();
  t.same(refusal(() => limiter.admit()), { statusCode: 429, retryAfter: 1 }, 'a third stream is refused');
  a();
  const c = limiter.admit();
  t.ok(c, 'one ended: the next is admitted');
  b();
  c();
  t.equal(refusal(() => new KeyLimiter(null).request()), null, 'no limits: nothing is refused');
});
