/**
 * Memory-budget eviction, with GGUF models on node-llama-cpp: with a budget that holds the two small models but not all three, loading
 * the large one unloads the least recently used idle model, estimated from the GGUF before loading.
 * And the memory a runner's buffers live in: transparent huge pages where the kernel offers them.
 */
import { readFile } from 'node:fs/promises';
import t from 'tap';
import { LlamaCppBackend } from '../../plugins/backend-llama-cpp/backend.js';
import { ON_LLAMA_CPP } from '../helpers/engines.js';
import { createModel } from '../helpers/models.js';
import { ollamaClient, startEngineAppliance } from './helpers.js';

const MB = 1024 * 1024;
const app = await startEngineAppliance({
  plugins: { engine: { options: { memoryBudget: 450 * MB } } },
  env: ON_LLAMA_CPP,
});
t.teardown(() => app.close());
await createModel(app, 'small1', 'gguf/stories260K.gguf');
await createModel(app, 'small2', 'gguf/stories260K-chatml.gguf');
await createModel(app, 'large', 'gguf/bench-random-135m-q4_0.gguf');
const ollama = ollamaClient(app);
const names = async () => (await ollama.ps()).models.map((m) => m.name).sort();

t.test('the estimates are what the budget is checked against', async (t) => {
  const backend = app.hooks.extensions
    .get('backends')
    .list()
    .find((b) => b.name === 'llama-cpp') as LlamaCppBackend;
  const store = app.hooks.extensions.get('models');
  const opts = { parallel: 4, threads: 1, contextLength: 4096 };
  const small = (await backend.estimateMemory(await store.resolve('small1'), opts)).totalBytes;
  const large = (await backend.estimateMemory(await store.resolve('large'), opts)).totalBytes;
  t.ok(2 * small < 450 * MB, `two small models fit (${Math.round(small / MB)} MB each)`);
  t.ok(2 * small + large > 450 * MB && small + large <= 450 * MB, `the large one (${Math.round(large / MB)} MB) fits beside one`);
});

t.test('loading past the budget unloads the least recently used idle model', async (t) => {
  await ollama.generate({ model: 'small1', prompt: '' });
  await ollama.generate({ model: 'small2', prompt: '' });
  await ollama.generate({ model: 'small2', prompt: 'Hi', options: { num_predict: 1 } });
  t.same(await names(), ['small1:latest', 'small2:latest']);
  await ollama.generate({ model: 'large', prompt: '' });
  t.same(await names(), ['large:latest', 'small2:latest'], 'small1 was the least recently used');
});

t.test('by default (hugePages: auto), runners ask for transparent huge pages for llama.cpp buffers', async (t) => {
  const backend = app.hooks.extensions
    .get('backends')
    .list()
    .find((b) => b.name === 'llama-cpp') as LlamaCppBackend;
  await ollama.generate({ model: 'large', prompt: 'Once', options: { num_predict: 4 } });
  const pid = backend.processes().find((p) => p.model === 'large:latest')?.pid;
  t.ok(pid, 'the runner of the loaded model');
  const environ = (await readFile(`/proc/${pid}/environ`, 'utf8')).split('\0');
  t.ok(environ.includes('GLIBC_TUNABLES=glibc.malloc.hugetlb=1'), 'started with the glibc tunable');
  const rollup = await readFile(`/proc/${pid}/smaps_rollup`, 'utf8');
  const hugeKb = Number(/^AnonHugePages:\s+(\d+) kB/m.exec(rollup)?.[1] ?? 0);
  const thp = await readFile('/sys/kernel/mm/transparent_hugepage/enabled', 'utf8');
  if (thp.includes('[never]')) {
    t.equal(hugeKb, 0, 'the kernel has transparent huge pages off: none');
  } else if (thp.includes('[madvise]')) {
    // glibc advises huge pages on its large mappings (the "hg" flag); whether the kernel finds free
    // 2 MiB pages at that moment depends on the machine, so the advice is what is checked.
    // The KV cache of 4 sequences alone is tens of MB; a few advised MB would be chance.
    const advisedKb = adviseHugeKb(await readFile(`/proc/${pid}/smaps`, 'utf8'));
    t.ok(advisedKb >= 16 * 1024, `KV cache and compute buffers advised to huge pages (${advisedKb} kB; ${hugeKb} kB given)`);
  } else {
    // [always]: the kernel backs large anonymous memory with huge pages unasked.
    t.ok(hugeKb > 0, `buffers on huge pages (${hugeKb} kB)`);
  }
});

/** Total size of the mappings in a `/proc/PID/smaps` text that carry the huge-page advice. */
function adviseHugeKb(smaps: string): number {
  let total = 0;
  let size = 0;
  for (const line of smaps.split('\n')) {
    const m = /^Size:\s+(\d+) kB/.exec(line);
    if (m) size = Number(m[1]);
    else if (line.startsWith('VmFlags:') && line.split(/\s+/).includes('hg')) total += size;
  }
  return total;
}
