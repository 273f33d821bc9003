/**
 * The offload plan as llama-server's command line (plugins/backend-llama-server/server.ts): the CPU
 * only, one device, and a model spread over several (`--tensor-split` in layers per device).
 */
import t from 'tap';
import { serverArgs, type ServerSpec } from '../../plugins/backend-llama-server/server.js';

const base: ServerSpec = {
  binary: '/llama-server',
  model: '/m.gguf',
  threads: 1,
  batchThreads: 1,
  parallel: 1,
  contextPerSlot: 256,
  batchSize: 256,
  embedding: false,
  startTimeoutMs: 1000,
};

function arg(args: string[], name: string): string | undefined {
  return args.includes(name) ? args[args.indexOf(name) + 1] : undefined;
}

t.test('no plan or a CPU plan: --device none and no layers', async (t) => {
  for (const offload of [undefined, { device: null, gpuLayers: 0 }]) {
    const args = serverArgs({ ...base, ...(offload ? { offload } : {}) }, { port: 1 });
    t.equal(arg(args, '--device'), 'none');
    t.equal(arg(args, '--n-gpu-layers'), '0');
    t.notOk(args.includes('--tensor-split'));
  }
});

t.test('one device: its name and the layer count', async (t) => {
  const args = serverArgs({ ...base, offload: { device: 'CUDA0', gpuLayers: 17 } }, { port: 1 });
  t.equal(arg(args, '--device'), 'CUDA0');
  t.equal(arg(args, '--n-gpu-layers'), '17');
  t.notOk(args.includes('--tensor-split'));
});

t.test('spread over two devices: both named, in order, each with its layers', async (t) => {
  const offload = {
    device: 'CUDA1',
    gpuLayers: 31,
    split: [
      { device: 'CUDA1', gpuLayers: 20 },
      { device: 'CUDA0', gpuLayers: 11 },
    ],
  };
  const args = serverArgs({ ...base, offload }, { port: 1 });
  t.equal(arg(args, '--device'), 'CUDA1,CUDA0');
  t.equal(arg(args, '--n-gpu-layers'), '31');
  t.equal(arg(args, '--tensor-split'), '20,11');
});

t.test('the KV cache type and flash attention: -ctk/-ctv for a quantized cache, -fa always said', async (t) => {
  const q8 = serverArgs({ ...base, kvCacheType: 'q8_0', flashAttention: true }, { port: 1 });
  t.equal(arg(q8, '--cache-type-k'), 'q8_0');
  t.equal(arg(q8, '--cache-type-v'), 'q8_0');
  t.equal(arg(q8, '--flash-attn'), 'on');
  const plain = serverArgs({ ...base, kvCacheType: 'f16', flashAttention: false }, { port: 1 });
  t.notOk(plain.includes('--cache-type-k'), "f16 is llama.cpp's own default");
  t.equal(arg(plain, '--flash-attn'), 'off');
  t.equal(arg(serverArgs(base, { port: 1 }), '--flash-attn'), 'auto');
});

t.test('speculative decoding: a draft model or n-gram lookup, with the flags of the bundled release', async (t) => {
  const draft = serverArgs({ ...base, speculation: { kind: 'draft', draft: { name: 'd:latest', path: '/d.gguf', sizeBytes: 1 }, maxDraft: 5 } }, { port: 1 });
  t.equal(arg(draft, '--spec-type'), 'draft-simple');
  t.equal(arg(draft, '--spec-draft-model'), '/d.gguf');
  t.equal(arg(draft, '--spec-draft-n-max'), '5');
  t.equal(arg(draft, '--spec-draft-n-min'), '0');
  t.equal(arg(draft, '--spec-draft-ngl'), '0', 'a model on the CPU keeps its draft there');
  const onGpu = serverArgs(
    {
      ...base,
      offload: { device: 'CUDA0', gpuLayers: 17 },
      speculation: { kind: 'draft', draft: { name: 'd:latest', path: '/d.gguf', sizeBytes: 1 }, maxDraft: 5 },
    },
    { port: 1 },
  );
  t.notOk(onGpu.includes('--spec-draft-ngl'), 'on a GPU llama-server places the draft as it places the model');
  const ngram = serverArgs({ ...base, speculation: { kind: 'ngram', ngram: 3, maxDraft: 4 } }, { port: 1 });
  t.equal(arg(ngram, '--spec-type'), 'ngram-simple');
  t.equal(arg(ngram, '--spec-ngram-simple-size-n'), '3');
  t.equal(arg(ngram, '--spec-ngram-simple-size-m'), '4');
  t.notOk(serverArgs(base, { port: 1 }).includes('--spec-type'), 'none without speculation');
});
