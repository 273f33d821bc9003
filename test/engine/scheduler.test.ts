/**
 * The scheduler on its own (unit tier: no process, no socket, no model file): a fake backend whose
 * loads and unloads the test can see and hold, and Node's mock timers for keep-alive, so each case
 * reads as a table row of "requests in, loads/unloads/503s out". The end-to-end behaviour on real
 * GGUF runners is in scheduler.model.test.ts.
 */
import { mock } from 'node:test';
import t from 'tap';
import { Errors } from 'lia/plugin';
import type { BackendRegistry, InferenceBackend, LoadedModel } from 'lia/engine';
import type { InferenceEvent } from 'lia/plugin/contracts';
import type { LoadOptions } from 'lia/engine';
import type { ResolvedModel } from 'lia/model-store';
import { Scheduler, type SchedulerOptions } from '../../plugins/engine/scheduler.js';

/** What the fake backend did, in order: `load a@2048`, `unload a`. */
type Journal = string[];

interface FakeBackend extends InferenceBackend {
  journal: Journal;
  /** The `onExit` of each model's latest load: calling it is a runner crash. */
  crash(name: string): void;
  /** Loads wait for `release()` while held. */
  hold(): { release(): void };
  /** The next `n` loads die of `signal` (an engine's native crash at load). */
  dieAtLoad(n: number, signal: string): void;
}

function fakeBackend(estimateBytes = 100, name = 'fake', journal: Journal = []): FakeBackend {
  const exits = new Map<string, (err: Error) => void>();
  let gate: Promise<void> | null = null;
  let deaths = 0;
  let deathSignal = '';
  const backend: FakeBackend = {
    name,
    dieAtLoad(n, signal) {
      deaths = n;
      deathSignal = signal;
    },
    formats: [],
    journal,
    crash: (name) => exits.get(name)?.(new Error('runner died')),
    hold() {
      let release = () => {};
      gate = new Promise<void>((resolve) => (release = resolve));
      return { release: () => ((gate = null), release()) };
    },
    estimateMemory: async () => ({ totalBytes: estimateBytes, vramBytes: 0 }),
    async load(model: ResolvedModel, options: LoadOptions): Promise<LoadedModel> {
      if (gate) await gate;
      const contextLength = Math.min(options.contextLength ?? 8192, 8192);
      if (deaths > 0) {
        deaths--;
        journal.push(`${name} died loading ${model.name}`);
        throw Errors.engineCrashed(`${name} died of ${deathSignal} while loading the model`, { crash: { engine: name, signal: deathSignal } });
      }
      journal.push(`${name === 'fake' ? '' : `${name} `}load ${model.name}@${contextLength}`);
      if (options.onExit) exits.set(model.name, options.onExit);
      let unloaded = false;
      return {
        capabilities: ['completion'],
        contextLength,
        sizeBytes: estimateBytes,
        vramBytes: 0,
        generate: () => (async function* () {})(),
        chat: () => (async function* () {})(),
        embed: async () => ({ embeddings: [], promptTokens: 0 }),
        async unload() {
          if (unloaded) return;
          unloaded = true;
          journal.push(`unload ${model.name}`);
        },
      };
    },
  };
  return backend;
}

function model(name: string, digest = `sha256:${name}`): ResolvedModel {
  return {
    name,
    digest,
    format: 'gguf',
    modelPath: `/models/${name}`,
    sizeBytes: 100,
    parameters: {},
    messages: [],
    capabilities: ['completion'],
    details: {},
  } as unknown as ResolvedModel;
}

const silent = {
  info() {},
  warn() {},
  error() {},
  debug() {},
  trace() {},
  fatal() {},
  child: () => silent,
  level: 'silent',
  silent() {},
} as unknown as SchedulerOptions['log'];

function scheduler(backend: FakeBackend | FakeBackend[], over: Partial<SchedulerOptions> = {}): Scheduler {
  const candidates = Array.isArray(backend) ? backend : [backend];
  return new Scheduler({
    backends: { candidates: async () => candidates } as unknown as BackendRegistry,
    log: silent,
    parallel: 1,
    maxQueue: 4,
    keepAliveMs: 5 * 60_000,
    maxLoadedModels: 3,
    memoryBudgetBytes: 1e12,
    contextLength: 2048,
    threads: 1,
    ...over,
  });
}

/** Lets the scheduler's promise chains run (loads, grants) without advancing mocked time. */
async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

const never = new AbortController().signal;

t.beforeEach(() => mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 1_000_000 }));
t.afterEach(() => mock.timers.reset());

t.test('queue: requests beyond the slots wait in order; past maxQueue a 503 with Retry-After', async (t) => {
  const backend = fakeBackend();
  const s = scheduler(backend, { parallel: 1, maxQueue: 2 });
  const first = await s.acquire(model('a'), {}, never);
  const granted: string[] = [];
  const second = s.acquire(model('a'), {}, never).then((l) => (granted.push('second'), l));
  const third = s.acquire(model('a'), {}, never).then((l) => (granted.push('third'), l));
  await settle();
  t.match(s.stats(), { queued: 2, active: 1 });
  const busy = await s.acquire(model('a'), {}, never).then(
    () => null,
    (err: unknown) => err,
  );
  t.match(busy, { statusCode: 503, headers: { 'Retry-After': '60' } }, 'the queue is full, and nothing has left it yet: 60 s');

  first.release();
  const l2 = await second;
  await settle();
  t.same(granted, ['second'], 'the first waiter gets the freed slot, the other still waits');
  l2.release();
  (await third).release();
  t.same(granted, ['second', 'third']);
  t.same(backend.journal, ['load a@2048'], 'one load served all of them');
});

t.test('Retry-After past maxQueue: the queued requests over the rate at which waiters got a slot in the last minute', async (t) => {
  const s = scheduler(fakeBackend(), { parallel: 1, maxQueue: 2 });
  const refused = async () =>
    s.acquire(model('a'), {}, never).then(
      () => null,
      (err: unknown) => (err as { headers: Record<string, string> }).headers['Retry-After'],
    );
  // The first request waits for the load (a release at 0 s), then six waiters get the slot one
  // after the other, 1 s apart: seven releases from the queue.
  let held = await s.acquire(model('a'), {}, never);
  for (let i = 0; i < 6; i++) {
    const next = s.acquire(model('a'), {}, never);
    await settle();
    mock.timers.tick(1000);
    held.release();
    held = await next;
  }
  const waiting = [s.acquire(model('a'), {}, never), s.acquire(model('a'), {}, never)];
  await settle();
  t.equal(await refused(), '18', 'two queued at seven a minute: 120 ÷ 7 s, rounded up');
  // The releases were at 0 s to 6 s; at 63.5 s those at 4, 5 and 6 s are still within the minute.
  mock.timers.tick(57_500);
  t.equal(await refused(), '40', 'four releases have aged out of the window: two queued at three a minute');
  mock.timers.tick(10_000);
  t.equal(await refused(), '60', 'none left in the window: 60 s');
  held.release();
  for (const w of waiting) (await w).release();
});

t.test('keep-alive: an idle model stays until its keep_alive runs out, a new request resets it', async (t) => {
  const backend = fakeBackend();
  const s = scheduler(backend);
  const rows: { keepAliveMs: number | undefined; idleFor: number; loaded: boolean }[] = [
    { keepAliveMs: 1000, idleFor: 999, loaded: true },
    { keepAliveMs: undefined, idleFor: 1, loaded: false },
  ];
  (await s.acquire(model('a'), { keepAliveMs: 1000 }, never)).release();
  for (const row of rows) {
    mock.timers.tick(row.idleFor);
    await settle();
    t.equal(s.ps().length === 1, row.loaded, `after ${row.idleFor} ms more idle: ${row.loaded ? 'loaded' : 'unloaded'}`);
  }
  t.same(backend.journal, ['load a@2048', 'unload a']);

  (await s.acquire(model('b'), { keepAliveMs: 1000 }, never)).release();
  mock.timers.tick(600);
  (await s.acquire(model('b'), {}, never)).release();
  mock.timers.tick(600);
  await settle();
  t.equal(s.ps().length, 1, 'a request in between restarts the countdown');
  mock.timers.tick(400);
  await settle();
  t.equal(s.ps().length, 0);

  const forever = await s.acquire(model('c'), { keepAliveMs: Infinity }, never);
  forever.release();
  mock.timers.tick(365 * 24 * 3600 * 1000);
  await settle();
  t.same(
    s.ps().map((m) => m.name),
    ['c'],
    'keep_alive -1 keeps it',
  );
  (await s.acquire(model('c'), { keepAliveMs: 0 }, never)).release();
  await settle();
  t.same(s.ps(), [], 'keep_alive 0 unloads once the request ends');
});

t.test('eviction: a new model makes room by unloading the least recently used idle one, and waits for busy ones', async (t) => {
  const backend = fakeBackend();
  const s = scheduler(backend, { maxLoadedModels: 2 });
  (await s.acquire(model('a'), {}, never)).release();
  mock.timers.tick(10);
  (await s.acquire(model('b'), {}, never)).release();
  mock.timers.tick(10);
  (await s.acquire(model('c'), {}, never)).release();
  t.same(backend.journal, ['load a@2048', 'load b@2048', 'unload a', 'load c@2048'], 'a, the least recently used, made room');

  const busyB = await s.acquire(model('b'), {}, never);
  const busyC = await s.acquire(model('c'), {}, never);
  let dLoaded = false;
  const d = s.acquire(model('d'), {}, never).then((l) => ((dLoaded = true), l));
  await settle();
  t.notOk(dLoaded, 'every loaded model is busy: the new one waits');
  busyC.release();
  (await d).release();
  t.same(backend.journal.slice(-2), ['unload c', 'load d@2048'], 'the first model released made room');
  busyB.release();
});

t.test('memory budget: estimates that do not fit unload idle models first', async (t) => {
  const backend = fakeBackend(600);
  const s = scheduler(backend, { memoryBudgetBytes: 1000 });
  (await s.acquire(model('a'), {}, never)).release();
  (await s.acquire(model('b'), {}, never)).release();
  t.same(backend.journal, ['load a@2048', 'unload a', 'load b@2048']);
});

t.test('memory budget: a draft model counts its weights and cache, not a second engine process', async (t) => {
  // 400 bytes a load, 100 of them the engine process: the model with its draft is 400 + 300, and a
  // second model of 400 fits beside it in 1100 (counting the process twice, 800 + 400, would not).
  const backend = fakeBackend(400);
  backend.estimateMemory = async () => ({ totalBytes: 400, vramBytes: 0, processBytes: 100 });
  const s = scheduler(backend, { memoryBudgetBytes: 1100 });
  const speculation = { kind: 'draft' as const, draft: { name: 'small', path: '/models/small', sizeBytes: 50 }, maxDraft: 3 };
  (await s.acquire(model('a'), { speculation }, never)).release();
  (await s.acquire(model('b'), {}, never)).release();
  t.same(backend.journal, ['load a@2048', 'load b@2048'], 'both loaded');
  (await s.acquire(model('c'), {}, never)).release();
  t.same(backend.journal.slice(2), ['unload a', 'load c@2048'], 'a third does not fit: the least recently used goes');
});

t.test('memory budget: what the offload plan puts on a GPU does not count against the host budget', async (t) => {
  // 600 bytes a model, 500 of them on the device (2 layers of 200, the output layer 50, a fixed 50):
  // two fit a 1000-byte host budget together only because the device holds most of each.
  const costs = { layers: 2, bytesPerLayer: 200, outputBytes: 50, fixedBytes: 50 };
  const onGpu = (devices: { id: string; name: string; totalBytes: number; freeBytes: number }[]) => {
    const backend = fakeBackend(600);
    backend.devices = async () => devices;
    const registry = { candidates: async () => [backend], handler: () => ({ offloadCosts: async () => costs }) } as unknown as BackendRegistry;
    return { backend, s: scheduler(backend, { memoryBudgetBytes: 1000, backends: registry }) };
  };
  const gpu = onGpu([{ id: 'Vulkan0', name: 'a GPU', totalBytes: 10_000, freeBytes: 10_000 }]);
  (await gpu.s.acquire(model('a'), {}, never)).release();
  (await gpu.s.acquire(model('b'), {}, never)).release();
  t.same(gpu.backend.journal, ['load a@2048', 'load b@2048'], 'both loaded: 100 bytes each in host memory');

  const cpu = onGpu([]);
  (await cpu.s.acquire(model('a'), {}, never)).release();
  (await cpu.s.acquire(model('b'), {}, never)).release();
  t.same(cpu.backend.journal, ['load a@2048', 'unload a', 'load b@2048'], 'without a device both are in host memory: one at a time');
});

t.test('a context larger than the default that does not fit the memory budget is refused with a context error', async (t) => {
  const backend = fakeBackend(600);
  const s = scheduler(backend, { memoryBudgetBytes: 1000, contextLength: 2048 });
  (await s.acquire(model('a'), {}, never)).release();
  backend.estimateMemory = async (_m, o) => ({ totalBytes: (o.contextLength ?? 2048) > 2048 ? 1200 : 600, vramBytes: 0 });
  const refused = await s.acquire(model('a'), { contextLength: 8192 }, never).then(
    () => null,
    (err: unknown) => err,
  );
  t.match(refused, { statusCode: 400, code: 'LIA_ERR_CONTEXT_LENGTH_EXCEEDED', message: /8192 tokens per sequence .* memory budget .*memoryBudget/ });
  t.same(backend.journal, ['load a@2048', 'unload a'], 'nothing loaded past the budget');
});

t.test('a runner crash forgets the model; waiting requests load it again', async (t) => {
  const backend = fakeBackend();
  const s = scheduler(backend, { parallel: 1 });
  const holder = await s.acquire(model('a'), {}, never);
  const waiting = s.acquire(model('a'), {}, never);
  await settle();
  backend.crash('a');
  const lease = await waiting;
  t.same(backend.journal, ['load a@2048', 'load a@2048'], 'loaded again for the waiting request');
  holder.release();
  lease.release();
  t.equal(s.ps().length, 1);
});

t.test('context: a larger num_ctx reloads an idle model; a smaller one is served by the larger context', async (t) => {
  const backend = fakeBackend();
  const s = scheduler(backend);
  const rows: { ask: number | undefined; journal: string }[] = [
    { ask: undefined, journal: 'load a@2048' },
    { ask: 4096, journal: 'load a@4096' },
    { ask: 1024, journal: 'load a@4096' },
    { ask: undefined, journal: 'load a@4096' },
  ];
  for (const row of rows) {
    const lease = await s.acquire(model('a'), row.ask === undefined ? {} : { contextLength: row.ask }, never);
    t.equal(backend.journal.filter((l) => l.startsWith('load')).at(-1), row.journal, `num_ctx ${row.ask ?? 'default'}: ${row.journal}`);
    lease.release();
  }
  t.same(backend.journal, ['load a@2048', 'unload a', 'load a@4096'], 'reloaded once, to grow');
});

t.test('a new digest under the same name is loaded fresh', async (t) => {
  const backend = fakeBackend();
  const s = scheduler(backend);
  (await s.acquire(model('a', 'sha256:1'), {}, never)).release();
  (await s.acquire(model('a', 'sha256:2'), {}, never)).release();
  t.same(backend.journal, ['load a@2048', 'unload a', 'load a@2048']);
  t.equal(s.ps()[0]?.digest, 'sha256:2');
});

t.test('a waiter that gives up leaves the queue; requests during a load wait for it', async (t) => {
  const backend = fakeBackend();
  const s = scheduler(backend, { parallel: 1 });
  const held = backend.hold();
  const ctl = new AbortController();
  const gaveUp = s.acquire(model('a'), {}, ctl.signal);
  const stays = s.acquire(model('a'), {}, never);
  await settle();
  t.match(s.stats(), { queued: 2, loaded: 0 }, 'both wait for the load');
  ctl.abort(new Error('client went away'));
  await t.rejects(gaveUp, { message: 'client went away' });
  t.match(s.stats(), { queued: 1 });
  held.release();
  (await stays).release();
  t.match(s.stats(), { queued: 0, active: 0, loaded: 1 });
});

t.test('unload of a model in use waits for its last request', async (t) => {
  const backend = fakeBackend();
  const s = scheduler(backend);
  const lease = await s.acquire(model('a'), {}, never);
  let gone = false;
  const unloading = s.unload('a', true).then(() => (gone = true));
  await settle();
  t.notOk(gone, 'still in use');
  t.same(backend.journal, ['load a@2048']);
  lease.release();
  await unloading;
  t.same(backend.journal, ['load a@2048', 'unload a']);
});

t.test('an engine that dies of a signal at load: retried once, then the next engine serves the model', async (t) => {
  const journal: Journal = [];
  const server = fakeBackend(100, 'llama-server', journal);
  const runner = fakeBackend(100, 'llama-cpp', journal);
  const events: InferenceEvent[] = [];
  const s = scheduler([server, runner], { observe: (e) => events.push(e) });
  server.dieAtLoad(2, 'SIGILL');
  (await s.acquire(model('a'), {}, never)).release();
  t.same(journal, ['llama-server died loading a', 'llama-server died loading a', 'llama-cpp load a@2048']);
  t.equal(s.ps()[0]?.engine, 'llama-cpp', '/api/ps names the engine that serves it');
  t.match(
    events.filter((e) => e.type === 'engine-fallback'),
    [{ model: 'a', engine: 'llama-server', signal: 'SIGILL', to: 'llama-cpp' }],
  );

  await s.unload('a', true);
  journal.length = 0;
  (await s.acquire(model('a'), {}, never)).release();
  t.same(journal, ['llama-cpp load a@2048'], 'the next load of that model goes straight to the engine that ran it');
  journal.length = 0;
  (await s.acquire(model('b'), {}, never)).release();
  t.same(journal, ['llama-server load b@2048'], 'other models still go to the first engine');
});

t.test('one death at load is retried on the same engine', async (t) => {
  const journal: Journal = [];
  const server = fakeBackend(100, 'llama-server', journal);
  const s = scheduler([server, fakeBackend(100, 'llama-cpp', journal)]);
  server.dieAtLoad(1, 'SIGKILL');
  (await s.acquire(model('a'), {}, never)).release();
  t.same(journal, ['llama-server died loading a', 'llama-server load a@2048']);
  t.equal(s.ps()[0]?.engine, 'llama-server');
});

t.test('when every engine dies at load: one error naming the model and each engine, and no loop', async (t) => {
  const journal: Journal = [];
  const server = fakeBackend(100, 'llama-server', journal);
  const runner = fakeBackend(100, 'llama-cpp', journal);
  const s = scheduler([server, runner]);
  server.dieAtLoad(2, 'SIGILL');
  runner.dieAtLoad(2, 'SIGSEGV');
  const err = await s.acquire(model('a'), {}, never).then(
    () => null,
    (e: unknown) => e as Error & { statusCode: number; code: string },
  );
  t.match(err, {
    statusCode: 500,
    code: 'LIA_ERR_ENGINE_CRASHED',
    message: 'model "a" cannot be loaded on this machine: llama-server died of SIGILL, llama-cpp died of SIGSEGV while loading it',
  });
  t.notMatch(err?.message ?? '', /\n|\//, 'one line, no file path');
  t.equal(journal.length, 4, 'two tries on each engine');
  journal.length = 0;
  await t.rejects(s.acquire(model('a'), {}, never), { code: 'LIA_ERR_ENGINE_CRASHED' });
  t.same(journal, [], 'a later request is refused without starting either engine again');
  t.same(s.ps(), []);
});
