/**
 * Runner CPU placement (plugins/backend-llama-cpp/placement.ts): the CPU-list parsing and choice
 * rules, table-driven, and binding real processes (`sleep`) with `taskset`, read back from /proc.
 * (Which sequence a prompt's cached prefix is copied from is the engines' one slot policy:
 * test/gguf/slot-choice.test.ts.)
 */
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import t from 'tap';
import { allowedCpus, chooseCpus, CpuPlacement, parseCpuList } from '../../plugins/backend-llama-cpp/placement.js';

t.test('cpu placement: lists parsed, the first CPU kept free, runners never share CPUs', async (t) => {
  t.same(parseCpuList('0-3,8,10-11'), [0, 1, 2, 3, 8, 10, 11]);
  t.same(parseCpuList('5'), [5]);
  t.same(parseCpuList('0-1,x'), [], 'anything unexpected: unknown');
  t.same(allowedCpus('Name:\tnode\nCpus_allowed:\t3\nCpus_allowed_list:\t0-1\n'), [0, 1]);
  t.same(allowedCpus('Name:\tnode\n'), []);
  t.same(chooseCpus([0, 1], new Set(), 1), [1], '2 CPUs, 1 thread: the second');
  t.equal(chooseCpus([0, 1], new Set([1]), 1), null, 'taken: none left');
  t.equal(chooseCpus([0], new Set(), 1), null, 'one CPU: unbound');
  t.equal(chooseCpus([0, 1, 2, 3], new Set(), 4), null, 'as many threads as CPUs: unbound');
  t.same(chooseCpus([0, 1, 2, 3, 4, 5, 6, 7], new Set(), 3), [5, 6, 7]);
  t.same(chooseCpus([0, 1, 2, 3, 4, 5, 6, 7], new Set([5, 6, 7]), 3), [2, 3, 4], 'the next runner gets the next free ones');
  t.same(chooseCpus([2, 4, 6], new Set(), 2), [4, 6], 'a restricted set: its own first CPU stays free');
  const placement = new CpuPlacement('off', [0, 1]);
  t.equal(await placement.place(process.pid, 1), null, 'off: never bound');
});

t.test('cpu placement: a runner left unbound takes the CPUs of one that stops', async (t) => {
  const allowed = allowedCpus();
  const sleeper = () => {
    const child = spawn('sleep', ['30'], { stdio: 'ignore' });
    t.teardown(() => child.kill());
    return child.pid!;
  };
  const cpusOf = async (pid: number) => allowedCpus(await readFile(`/proc/${pid}/status`, 'utf8'));
  const placement = new CpuPlacement('auto', allowed);
  const [first, second] = [sleeper(), sleeper()];
  const expected = chooseCpus(allowed, new Set(), 1);
  t.same(await placement.place(first, 1), expected, 'the first takes the last CPU (none on a 1-CPU machine)');
  if (expected) {
    t.same(await cpusOf(first), expected, 'bound, all its threads');
    const next = chooseCpus(allowed, new Set(expected), 1);
    t.same(await placement.place(second, 1), next, next ? 'the second takes the next free CPU' : 'none left: unbound');
    if (!next) {
      t.same(await cpusOf(second), allowed, 'unbound meanwhile');
      await placement.release(first);
      t.same(await cpusOf(second), expected, 'the first stopped: the second takes its CPU');
    }
  } else {
    t.same(await cpusOf(first), allowed, 'a single CPU: unbound');
  }
});
