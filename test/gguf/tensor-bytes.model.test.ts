/**
 * The GGUF header reader's tensor byte groups, which the GPU offload plan divides a model by: the
 * repeating layers, the output layer (a copy of the token embeddings where they are tied) and the
 * rest, on real model files (../shared/models).
 */
import { stat } from 'node:fs/promises';
import t from 'tap';
import { readGgufHeader } from '../../plugins/gguf/header.js';
import { fixture } from '../helpers/fixtures.js';

async function groups(name: string) {
  const file = fixture(`gguf/${name}`);
  const header = await readGgufHeader(file, { maxArrayLength: 0 });
  return { ...header.tensorBytes, file: (await stat(file)).size };
}

t.test('a model with its own output.weight: the three groups are its tensor data', async (t) => {
  const g = await groups('stories260K.gguf');
  t.equal(g.output, 131_328, 'output.weight (512 x 64, F32) and output_norm (64, F32)');
  t.equal(g.other, 131_072, 'token_embd stays apart');
  t.ok(g.layers > 0);
  const data = g.layers + g.output + g.other;
  t.ok(data <= g.file && data > g.file - 64 * 1024, `tensor data ${data} B within the file's ${g.file} B, less its header`);
});

t.test('tied embeddings: the output layer is a copy of token_embd', async (t) => {
  const g = await groups('tinystories-656k-q8_0.gguf');
  t.equal(g.output - 512, g.other, 'output = output_norm + the token embeddings offloaded again');
  const data = g.layers + g.other + (g.output - g.other);
  t.ok(data <= g.file && data > g.file - 64 * 1024);
});

t.test('the bench model: thirty layers of equal size', async (t) => {
  const g = await groups('bench-random-135m-q4_0.gguf');
  t.equal(g.layers % 30, 0, 'the repeating layers divide evenly');
  t.ok(g.layers > 5 * g.output, 'most bytes are in the layers');
});
