/**
 * The engines' one slot policy (plugins/gguf/slots/slot-choice.ts), as one table of cases: which
 * slot a request takes, whose prefix it copies and whether it waits, in tokens (1 unit a token, as
 * node-llama-cpp measures) and again in characters (4 units a token, as llama-server measures):
 * the same facts scaled give the same choice.
 */
import t from 'tap';
import { chooseSlot, MIN_SHARED_TOKENS as MIN, SERIAL_PROMPT_TOKENS as SERIAL, type SlotFacts } from 'lia/gguf';

/** A slot: `held` of the request's prompt, `last` its own last prompt, `size` its cache. */
const slot = (id: number, f: Partial<Omit<SlotFacts, 'id'>> = {}): SlotFacts => ({
  id,
  held: 0,
  last: 0,
  size: 0,
  busy: false,
  evaluating: false,
  lastUsed: 0,
  ...f,
});
/** A slot holding a conversation: its last prompt of `last` tokens, `held` of which the request shares. */
const holding = (id: number, last: number, held: number, lastUsed: number, f: Partial<SlotFacts> = {}) =>
  slot(id, { last, size: last + 20, held, lastUsed, ...f });

interface Case {
  name: string;
  slots: SlotFacts[];
  /** The prompt's length in tokens. */
  length: number;
  shareable?: boolean;
  /** The slot taken (null: all busy), the donor (and whether it waits), and the flags. */
  want: { id: number; donor?: { id: number; wait: boolean }; opens?: boolean; takesTurn?: boolean } | null;
}

const cases: Case[] = [
  { name: 'every slot busy: none', slots: [slot(0, { busy: true }), slot(1, { busy: true })], length: 10, want: null },
  { name: 'empty slots: the lowest id', slots: [slot(2), slot(1)], length: 10, want: { id: 1 } },
  {
    name: 'the next turn of a conversation goes back to its slot, over an empty one',
    slots: [slot(0), holding(1, 100, 130, 1), holding(2, 40, 12, 2)],
    length: 150,
    want: { id: 1 },
  },
  {
    name: 'the same prompt again lands where it was',
    slots: [holding(0, 50, 50, 2), slot(1)],
    length: 50,
    want: { id: 0 },
  },
  {
    name: 'a new conversation does not take over a slot only for its system prompt (held less than the slot’s last prompt)',
    slots: [holding(0, MIN + 40, MIN + 30, 1), slot(1)],
    length: MIN + 40,
    want: { id: 1, donor: { id: 0, wait: false }, takesTurn: false },
  },
  {
    name: 'nothing continued, nothing empty: the least recently used',
    slots: [holding(0, 170, 1, 5), holding(1, 160, 1, 2), holding(2, 90, 1, 4)],
    length: 30,
    want: { id: 1 },
  },
  {
    name: 'the same while another is busy: the lowest free id (busy slots stay consecutive, one micro-batch)',
    slots: [holding(0, 170, 1, 5, { busy: true }), holding(1, 160, 1, 4), holding(2, 90, 1, 2)],
    length: 30,
    want: { id: 1 },
  },
  {
    name: 'a shared prefix shorter than the threshold is evaluated again',
    slots: [holding(0, MIN + 10, MIN - 1, 1), slot(1)],
    length: MIN + 5,
    // Not copied; and as nobody holds it, it opens (see below).
    want: { id: 1, opens: true },
  },
  {
    name: 'a donor still evaluating the prefix is waited for',
    slots: [slot(0, { busy: true, evaluating: true, held: 2 * MIN, size: 10, last: 3 * MIN, lastUsed: 1 }), slot(1)],
    length: 3 * MIN,
    want: { id: 1, donor: { id: 0, wait: true }, takesTurn: true },
  },
  {
    name: 'as long and already evaluated: no wait',
    slots: [slot(0, { busy: true, evaluating: true, held: 2 * MIN, lastUsed: 3 }), holding(1, 3 * MIN, 2 * MIN, 1), slot(2)],
    length: 2 * MIN + 10,
    want: { id: 2, donor: { id: 1, wait: false } },
  },
  {
    name: 'a longer prefix on its way beats a shorter one cached',
    slots: [slot(0, { busy: true, evaluating: true, held: 3 * MIN, lastUsed: 2 }), holding(1, 3 * MIN, 2 * MIN, 1), slot(2)],
    length: 3 * MIN + 10,
    want: { id: 2, donor: { id: 0, wait: true } },
  },
  {
    name: 'arrivals together copy the one given its request first, not another waiter',
    slots: [
      slot(0, { busy: true, evaluating: true, held: 2 * MIN, lastUsed: 1 }),
      slot(1, { busy: true, evaluating: true, held: 2 * MIN, lastUsed: 2 }),
      slot(2),
    ],
    length: 2 * MIN + 10,
    want: { id: 2, donor: { id: 0, wait: true } },
  },
  {
    name: 'the own slot holds nearly as much: no copy',
    slots: [holding(0, 2 * MIN, 2 * MIN, 1, { busy: true }), holding(1, 3 * MIN, MIN + 1, 2)],
    length: 3 * MIN,
    want: { id: 1, opens: true },
  },
  {
    name: 'a prompt that may not share (images, no copy) has no donor',
    slots: [holding(0, 3 * MIN, 2 * MIN, 1), slot(1)],
    length: 2 * MIN + 10,
    shareable: false,
    want: { id: 1, takesTurn: true },
  },
  {
    name: 'a new conversation’s long prompt nobody holds opens: others may copy it once evaluated',
    slots: [slot(0), slot(1)],
    length: MIN + 10,
    want: { id: 0, opens: true },
  },
  {
    name: 'a long prompt with no copy and many new tokens takes its turn',
    slots: [slot(0), slot(1)],
    length: SERIAL + 1,
    shareable: false,
    want: { id: 0, takesTurn: true },
  },
  {
    name: 'a next turn with few new tokens goes at once',
    slots: [holding(0, 4 * MIN, 4 * MIN + 20, 1), slot(1)],
    length: 4 * MIN + SERIAL - 30,
    want: { id: 0 },
  },
  {
    name: 'one slot: nobody to share with, nobody to take turns with',
    slots: [slot(0)],
    length: 4 * MIN,
    want: { id: 0 },
  },
];

const scale = (f: SlotFacts, by: number): SlotFacts => ({ ...f, held: f.held * by, last: f.last * by, size: f.size * by });

for (const unitsPerToken of [1, 4]) {
  t.test(`slot choice, ${unitsPerToken === 1 ? 'in tokens' : 'in characters (4 a token)'}`, async (t) => {
    for (const c of cases) {
      const got = chooseSlot(
        c.slots.map((s) => scale(s, unitsPerToken)),
        { length: c.length * unitsPerToken, unitsPerToken, shareable: c.shareable ?? true },
      );
      const seen = got && { id: got.id, donor: got.donor && { id: got.donor.id, wait: got.donor.wait }, opens: got.opens, takesTurn: got.takesTurn };
      const want = c.want && { donor: null, opens: false, takesTurn: false, ...c.want };
      t.same(seen, want, c.name);
    }
  });
}
