/**
 * The queue's drain rate on its own (unit tier, an injected clock, no timers): `Retry-After` is
 * ceil(queued ÷ releases per second over the last 60 s), clamped to 1–60 s, and 60 s when nothing
 * left the queue in the window.
 */
import t from 'tap';
import { DrainRate, MAX_RETRY_AFTER_S } from '../../plugins/engine/drain.js';

/** A drain rate on a clock the test moves; `at(ms)` records a release at that time. */
function drain(): { rate: DrainRate; at(...ms: number[]): void; set(ms: number): void } {
  let now = 0;
  const rate = new DrainRate({ now: () => now });
  return {
    rate,
    at(...ms) {
      for (const m of ms) {
        now = m;
        rate.record();
      }
    },
    set(ms) {
      now = ms;
    },
  };
}

const rows: { name: string; releases: number[]; now: number; queued: number; want: number }[] = [
  { name: 'nothing drained yet: the maximum', releases: [], now: 0, queued: 5, want: 60 },
  { name: 'one release a minute, one queued: 60 s', releases: [1000], now: 2000, queued: 1, want: 60 },
  { name: 'three releases, one queued: 60 ÷ 3', releases: [1000, 2000, 3000], now: 4000, queued: 1, want: 20 },
  { name: 'four releases, two queued: 2 × 60 ÷ 4', releases: [0, 1, 2, 3], now: 10_000, queued: 2, want: 30 },
  { name: 'seven releases, one queued: 60 ÷ 7 rounded up', releases: [1, 2, 3, 4, 5, 6, 7], now: 100, queued: 1, want: 9 },
  { name: 'a fast drain: at least one second', releases: Array.from({ length: 600 }, (_, i) => i * 10), now: 6000, queued: 2, want: 1 },
  { name: 'nobody queued: at least one second', releases: [10, 20], now: 30, queued: 0, want: 1 },
  { name: 'a slow drain and a long queue: at most 60 s', releases: [1000, 2000], now: 3000, queued: 512, want: 60 },
  { name: 'releases older than the window no longer count', releases: [0, 1000, 2000, 61_500], now: 62_000, queued: 1, want: 60 },
  { name: 'a release exactly 60 s old has left the window', releases: [0, 30_000], now: 60_000, queued: 1, want: 60 },
  { name: 'the window slid past every release: the maximum again', releases: [0, 1, 2], now: 70_000, queued: 1, want: MAX_RETRY_AFTER_S },
];

for (const row of rows) {
  t.test(row.name, async (t) => {
    const d = drain();
    d.at(...row.releases);
    d.set(row.now);
    t.equal(d.rate.retryAfterSeconds(row.queued), row.want);
  });
}

t.test('the rate is releases per second over the window', async (t) => {
  const d = drain();
  d.at(...Array.from({ length: 30 }, (_, i) => i * 1000));
  d.set(30_000);
  t.equal(d.rate.released(), 30);
  t.equal(d.rate.perSecond(), 0.5);
  d.set(75_000);
  t.equal(d.rate.released(), 14, 'those of the last 60 s (15 s to 29 s)');
});

t.test('many releases: old ones are dropped, the count stays right', async (t) => {
  const d = drain();
  for (let i = 0; i < 10_000; i++) d.at(i * 20);
  // The last release is at 199,980 ms; the window holds those after 139,980 ms: 140,000 to 199,980.
  t.equal(d.rate.released(), 3000);
  t.equal(d.rate.retryAfterSeconds(100), 2, '100 queued at 50 a second: exactly 2 s, not rounded up');
  t.equal(d.rate.retryAfterSeconds(101), 3, '101 queued: 2.02 s, rounded up');
});
