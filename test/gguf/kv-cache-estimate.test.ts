/**
 * The memory estimate counts the KV cache in the load's type (plugins/gguf/estimate.ts): q8_0 is
 * 34 bytes per 32 elements, q4_0 18, against f16's 64; and a quantized type fits only heads its
 * blocks of 32 divide.
 */
import t from 'tap';
import { estimateBytes, kvCacheFits, type GgufShape } from '../../plugins/gguf/estimate.js';

// A TinyLlama-shaped model: 22 layers, 4 KV heads of 64.
const shape: GgufShape = {
  layers: 22,
  embedding: 2048,
  heads: 32,
  kvHeads: 4,
  headDimK: 64,
  headDimV: 64,
  trainedContext: 2048,
  vocab: 32000,
  tensorBytes: { layers: 0, output: 0, other: 0 },
};

t.test('the cache in q8_0 and q4_0 takes 34/64 and 18/64 of f16', async (t) => {
  const load = { contextLength: 2048, parallel: 4, batchSize: 512 };
  const weights = 600e6;
  // The cache of 1,024 tokens per slot: two estimates that differ only in it (same batch, same compute buffer).
  const cache = (type?: 'f16' | 'q8_0' | 'q4_0') =>
    estimateBytes(shape, weights, { ...load, kvCacheType: type }) - estimateBytes(shape, weights, { ...load, contextLength: 1024, kvCacheType: type });
  const f16 = cache();
  // 2 (K and V) × 1024 tokens × 4 slots × 256 wide × 22 layers × 2 bytes.
  t.equal(f16, 2 * 1024 * 4 * 256 * 22 * 2, `f16 cache ${f16} B`);
  t.ok(Math.abs(cache('q8_0') / f16 - 34 / 64) < 0.01, 'q8_0');
  t.ok(Math.abs(cache('q4_0') / f16 - 18 / 64) < 0.01, 'q4_0');
  t.equal(cache('f16'), f16);
});

t.test('quantized types need heads a multiple of 32 wide', async (t) => {
  t.ok(kvCacheFits(shape, 'q8_0'));
  t.notOk(kvCacheFits({ ...shape, headDimK: 16, headDimV: 16 }, 'q4_0'));
  t.ok(kvCacheFits({ ...shape, headDimK: 16, headDimV: 16 }, 'f16'));
});
