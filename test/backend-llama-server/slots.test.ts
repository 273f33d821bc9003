/**
 * Slot placement on llama-server (plugins/backend-llama-server/slots.ts, over the policy of
 * plugins/gguf/slots/slot-choice.ts, whose own table is test/gguf/slot-choice.test.ts): a conversation keeps its slot, a new one
 * takes an empty slot and copies a long shared prefix from the slot that holds it, and a slot is
 * given up least recently used first.
 */
import t from 'tap';
import { CHARS_PER_TOKEN, MIN_SHARED_TOKENS } from 'lia/gguf';
import { SlotTable } from '../../plugins/backend-llama-server/slots.js';

/** A canonical prompt as slots.ts writes it: the messages last, closed by the JSON's brackets. */
const prompt = (...messages: string[]) => JSON.stringify(['/v1/chat/completions', null, null, null, messages.map((content) => ({ role: 'user', content }))]);
const SYSTEM = 'You are a coding agent. '.repeat(Math.ceil((2 * MIN_SHARED_TOKENS * CHARS_PER_TOKEN) / 24));

t.test('a conversation keeps its slot while another comes and goes', async (t) => {
  const table = new SlotTable(2);
  const a1 = table.acquire(prompt(SYSTEM, 'task A'))!;
  table.release(a1.slot, true);
  const b1 = table.acquire(prompt(SYSTEM, 'task B'))!;
  t.not(b1.slot.id, a1.slot.id, 'a new conversation takes the empty slot, not the one that shares its system prompt');
  t.equal(b1.donor?.id, a1.slot.id, 'and copies the shared system prompt from the slot that holds it');
  t.ok(b1.held === 0, 'its own slot held nothing of it');
  table.release(b1.slot, true);
  const a2 = table.acquire(prompt(SYSTEM, 'task A', 'answer A', 'more A'))!;
  t.equal(a2.slot.id, a1.slot.id, 'the next turn goes back to its own slot');
  t.equal(a2.donor, null, 'nothing to copy: the slot holds the whole earlier turn');
  table.release(a2.slot, true);
  const same = table.acquire(prompt(SYSTEM, 'task B'))!;
  t.equal(same.slot.id, b1.slot.id, 'the same prompt again lands where it was');
});

t.test('the least recently used slot is given up; short shared prefixes are not copied', async (t) => {
  const table = new SlotTable(2);
  const x = table.acquire(prompt('x'))!;
  table.release(x.slot, true);
  const y = table.acquire(prompt('y'))!;
  table.release(y.slot, true);
  const z = table.acquire(prompt('z'))!;
  t.equal(z.slot.id, x.slot.id, 'the slot used longest ago');
  t.equal(z.donor, null, 'a prefix shorter than the threshold is evaluated again');
  const w = table.acquire(prompt('w'))!;
  t.equal(w.slot.id, y.slot.id, 'a busy slot is never taken');
  t.equal(table.acquire(prompt('v')), null, 'every slot busy: the server queues the request');
});

t.test('a donor still evaluating is waited for; a failed one is forgotten', async (t) => {
  const table = new SlotTable(3);
  const first = table.acquire(prompt(SYSTEM, 'one'))!;
  const second = table.acquire(prompt(SYSTEM, 'two'))!;
  t.equal(second.donor?.id, first.slot.id, 'a request arriving while the prefix is evaluated copies it');
  let done = false;
  void second.donor!.evaluated.then(() => (done = true));
  await new Promise((r) => setImmediate(r));
  t.notOk(done, 'the copy waits for the donor to evaluate its prompt');
  table.evaluated(first.slot);
  await new Promise((r) => setImmediate(r));
  t.ok(done, 'and goes on once it has');
  table.release(first.slot, true);
  table.release(second.slot, false);
  const third = table.acquire(prompt(SYSTEM, 'three'))!;
  t.equal(third.slot.id, 1, 'the slot of a request that failed before its prompt was evaluated counts as empty');
  t.equal(third.donor?.id, first.slot.id, 'and only the slot that evaluated the prefix is a donor');
  t.not(table.acquire(prompt('unrelated'))!.donor, first.slot, 'a prompt sharing nothing has no donor');
});

t.test('conversations arriving together all copy the first one, not each other', async (t) => {
  const table = new SlotTable(4);
  const first = table.acquire(prompt(SYSTEM, 'session 0'))!;
  const others = [1, 2, 3].map((n) => table.acquire(prompt(SYSTEM, `session ${n}`))!);
  t.same(
    others.map((o) => o.donor?.id),
    [first.slot.id, first.slot.id, first.slot.id],
    'every later arrival waits for the slot that evaluates the prefix, never for another waiter',
  );
});
