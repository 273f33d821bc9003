/**
 * A named key's limits as its holder meets them over time (the clock is passed in, so minutes pass
 * instantly): a minute's allowance in a burst, then one request back every 60/N seconds; tokens
 * reserved at admission (prompt and cap) and settled when the request ends; concurrent streams
 * free up when a stream ends. Each refusal is a 429 whose Retry-After says when to come back.
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
  const limiter = new KeyLimiter({ requests_per_minute: 6 }, () => 0);
  for (let i = 0; i < 6; i++)
    t.equal(
      refusal(() => limiter.request(0)),
      null,
      `request ${i + 1} of the burst`,
    );
  t.same(
    refusal(() => limiter.request(0)),
    { statusCode: 429, retryAfter: 10 },
    'the 7th waits one refill: 10 s',
  );
  t.same(
    refusal(() => limiter.request(9_000)),
    { statusCode: 429, retryAfter: 1 },
    'at 9 s: 1 s to go',
  );
  t.equal(
    refusal(() => limiter.request(10_000)),
    null,
    'at 10 s one request is back',
  );
  t.ok(
    refusal(() => limiter.request(10_000)),
    'and only one',
  );
});

t.test('tokens per minute: admission reserves the prompt and the cap, the end settles it', async (t) => {
  const limiter = new KeyLimiter({ tokens_per_minute: 60 }, () => 0);
  const first = limiter.admit({ promptTokens: 5, maxTokens: 20 }, 0);
  t.equal(first.maxTokens, 20, 'the asked cap fits: kept');
  const second = limiter.admit({ promptTokens: 5, maxTokens: 20 }, 0);
  t.same(
    refusal(() => limiter.admit({ promptTokens: 5, maxTokens: 20 }, 0)),
    { statusCode: 429, retryAfter: 15 },
    'two reservations of 25 leave 10; 15 more come in 15 s',
  );
  first.release(8);
  t.equal(
    refusal(() => limiter.admit({ promptTokens: 5, maxTokens: 20 }, 0).release(25)),
    null,
    'the unused 17 came back: admitted at once',
  );
  second.release(25);
  t.same(
    refusal(() => limiter.admit({ promptTokens: 5, maxTokens: 20 }, 0)),
    { statusCode: 429, retryAfter: 23 },
    '2 left: 23 s until 25',
  );
});

t.test('tokens per minute: no cap asked, and a reservation over the minute', async (t) => {
  const limiter = new KeyLimiter({ tokens_per_minute: 100 }, () => 0);
  const whole = limiter.admit({ promptTokens: 4, maxTokens: null }, 0);
  t.equal(whole.maxTokens, 96, 'without max_tokens the default cap is cut to the minute less the prompt');
  t.ok(
    refusal(() => limiter.admit({ promptTokens: 1, maxTokens: 1 }, 0)),
    'the minute is reserved: the next waits',
  );
  whole.release(100);
  t.same(
    refusal(() => limiter.admit({ promptTokens: 1, maxTokens: null }, 30_000)),
    { statusCode: 429, retryAfter: 30 },
    'half refilled after 30 s; 30 s more for a full reservation',
  );
  t.equal(
    refusal(() => limiter.admit({ promptTokens: 1, maxTokens: null }, 60_000)),
    null,
    'full again: admitted',
  );
  const embed = new KeyLimiter({ tokens_per_minute: 100 }, () => 0).admit({ promptTokens: 10, maxTokens: 0 }, 0);
  t.equal(embed.maxTokens, undefined, 'an embedding reserves its input and has nothing to cap');
  t.equal(new KeyLimiter({ concurrent_streams: 1 }).admit({ promptTokens: 1, maxTokens: null }).maxTokens, undefined, 'no token limit: no cap');
});

t.test('concurrent streams', async (t) => {
  const limiter = new KeyLimiter({ concurrent_streams: 2 });
  const a = limiter.admit();
  const b = limiter.admit();
  t.same(
    refusal(() => limiter.admit()),
    { statusCode: 429, retryAfter: 1 },
    'a third stream is refused',
  );
  a.release();
  a.release();
  const c = limiter.admit();
  t.ok(c, 'one ended: the next is admitted');
  t.ok(
    refusal(() => limiter.admit()),
    'a second release of the same admission frees nothing more',
  );
  b.release();
  c.release();
  t.equal(
    refusal(() => new KeyLimiter(null).request()),
    null,
    'no limits: nothing is refused',
  );
});
