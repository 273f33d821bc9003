/**
 * Unit tests of the transformers backend's pure parts: pass planning and padding, pooling and
 * normalisation, token limits and the memory estimate (an encoder-decoder speech model's too),
 * and a speech window's normalisation against the library's own `Wav2Vec2FeatureExtractor`
 * (imported, no model loaded).
 */
import t from 'tap';
import { padPass, planPasses, type Encoding } from '../../plugins/backend-transformers/batching.js';
import { normalizeWindow } from '../../plugins/backend-transformers/ctc.js';
import { shapeOf, tokenLimit, type OnnxLayout } from '../../plugins/backend-transformers/layout.js';
import { estimateBytes } from '../../plugins/backend-transformers/memory.js';
import { finish, meanPool, normalize, pool } from '../../plugins/backend-transformers/pooling.js';
import { transformers } from '../../plugins/backend-transformers/runtime.js';

const norm = (v: ArrayLike<number>): number => Math.hypot(...Array.from(v));

t.test('planPasses: one pass in input order when the batch fits the budget', async (t) => {
  t.same(planPasses([3, 9, 5], 27), [[0, 1, 2]]);
  t.same(planPasses([], 100), []);
});

t.test('planPasses: longest first, never over budget unless a single input is', async (t) => {
  const lengths = [10, 200, 30, 200, 12, 600, 31, 8];
  const budget = 512;
  const passes = planPasses(lengths, budget);
  t.same(
    passes.flat().sort((a, b) => a - b),
    lengths.map((_, i) => i),
    'every input exactly once',
  );
  t.same(passes[0], [5], 'the 600-token input (over budget) runs alone');
  for (const pass of passes.slice(1)) {
    const width = Math.max(...pass.map((i) => lengths[i]!));
    t.ok(width * pass.length <= budget, `pass ${JSON.stringify(pass)} pads to ${width * pass.length} tokens`);
  }
  t.same(passes[1], [1, 3], 'equal lengths keep input order');
});

t.test('padPass: pads ids with the pad id and masks with 0, on either side', async (t) => {
  const enc: Encoding[] = [
    { input_ids: [101, 7, 102], attention_mask: [1, 1, 1], token_type_ids: [0, 0, 0] },
    { input_ids: [101, 102], attention_mask: [1, 1], token_type_ids: [0, 0] },
  ];
  const right = padPass(enc, [1, 0], 9, 'right');
  t.equal(right.width, 3);
  t.same(right.indices, [1, 0]);
  t.same(Array.from(right.tensors['input_ids']!.data), [101n, 102n, 9n, 101n, 7n, 102n]);
  t.same(right.tensors['input_ids']!.dims, [2, 3]);
  t.same(Array.from(right.tensors['attention_mask']!.data), [1n, 1n, 0n, 1n, 1n, 1n]);
  t.same(Array.from(right.mask), [1, 1, 0, 1, 1, 1]);
  const left = padPass(enc, [1], 9, 'left');
  t.same(Array.from(left.tensors['input_ids']!.data), [101n, 102n], 'a single row is not padded');
  const both = padPass(enc, [0, 1], 0, 'left');
  t.same(Array.from(both.tensors['input_ids']!.data), [101n, 7n, 102n, 0n, 101n, 102n]);
  t.same(Array.from(both.mask), [1, 1, 1, 0, 1, 1]);
});

t.test('meanPool averages only the real tokens', async (t) => {
  // 2 inputs × 3 tokens × width 2; the second input's last token is padding.
  const hidden = Float32Array.from([1, 2, 3, 4, 5, 6, 10, 20, 30, 40, 1000, 1000]);
  const [a, b] = meanPool(hidden, [2, 3, 2], Uint8Array.from([1, 1, 1, 1, 1, 0]));
  t.same(Array.from(a!), [3, 4]);
  t.same(Array.from(b!), [20, 30]);
  t.throws(() => meanPool(hidden, [2, 2, 2], new Uint8Array(4)), /shape \[2, 2, 2\]/);
});

t.test('pool: cls takes the first real token, lasttoken the last, on either padding side', async (t) => {
  const hidden = Float32Array.from([1, 2, 3, 4, 5, 6, 10, 20, 30, 40, 1000, 1000]);
  const right = Uint8Array.from([1, 1, 1, 1, 1, 0]);
  t.same(
    pool(hidden, [2, 3, 2], right, 'cls').map((v) => Array.from(v)),
    [
      [1, 2],
      [10, 20],
    ],
  );
  t.same(
    pool(hidden, [2, 3, 2], right, 'lasttoken').map((v) => Array.from(v)),
    [
      [5, 6],
      [30, 40],
    ],
  );
  const left = Uint8Array.from([1, 1, 1, 0, 1, 1]);
  t.same(
    pool(hidden, [2, 3, 2], left, 'cls').map((v) => Array.from(v)),
    [
      [1, 2],
      [30, 40],
    ],
  );
  t.same(
    pool(hidden, [2, 3, 2], left, 'mean').map((v) => Array.from(v)),
    [
      [3, 4],
      [515, 520],
    ],
  );
});

t.test('normalize and finish give unit vectors; dimensions re-normalise', async (t) => {
  t.same(Array.from(normalize(Float32Array.from([3, 4]))), [Math.fround(0.6), Math.fround(0.8)]);
  t.same(Array.from(normalize(new Float32Array(3))), [0, 0, 0], 'zero stays zero');
  const full = finish(Float32Array.from([1, 2, 3, 4]));
  t.ok(Math.abs(norm(full) - 1) < 1e-6);
  t.ok(
    full.every((x) => Math.fround(x) === x),
    'values are exact float32',
  );
  const cut = finish(Float32Array.from([1, 2, 3, 4]), 2);
  t.equal(cut.length, 2);
  t.ok(Math.abs(norm(cut) - 1) < 1e-6);
  t.ok(Math.abs(cut[1]! / cut[0]! - 2) < 1e-6, 'keeps the direction of the first dimensions');
  t.equal(finish(Float32Array.from([1, 2]), 5).length, 2, 'more dimensions than the width: the whole vector');
  t.same(finish(Float32Array.from([3, 4, 12]), undefined, false), [3, 4, 12], 'not normalised: the raw mean');
  t.same(finish(Float32Array.from([3, 4, 12]), 2, false), [3, 4], 'not normalised, cut as it is');
});

t.test('tokenLimit takes the smallest real limit', async (t) => {
  t.equal(tokenLimit({ max_position_embeddings: 512 }, { model_max_length: 512 }, null), 512);
  t.equal(tokenLimit({ max_position_embeddings: 512 }, { model_max_length: 1e30 }, null), 512, 'ignores the no-limit sentinel');
  t.equal(tokenLimit({ max_position_embeddings: 514 }, { model_max_length: 512 }, null), 512);
  t.equal(tokenLimit({ max_position_embeddings: 512 }, {}, { max_seq_length: 256 }), 256, 'sentence-transformers limit');
  t.equal(tokenLimit({}, {}, null), 512, 'default');
});

t.test('shapeOf reads BERT names and the memory estimate grows with the budget', async (t) => {
  const shape = shapeOf({ model_type: 'bert', hidden_size: 384, num_hidden_layers: 6, num_attention_heads: 12, intermediate_size: 1536 }, 512);
  t.same(shape, { modelType: 'bert', hiddenSize: 384, layers: 6, heads: 12, intermediateSize: 1536, maxTokens: 512 });
  const layout: OnnxLayout = {
    dir: '/m',
    dtype: 'q8',
    weightsFiles: ['onnx/model_quantized.onnx'],
    weightsBytes: 23_000_000,
    tokenizerBytes: 700_000,
    shape,
    pooling: 'mean',
    head: { kind: 'encoder' },
  };
  const small = estimateBytes(layout, 4096);
  t.ok(small > 23_000_000 + 700_000 * 30, 'more than weights and tokenizer');
  t.ok(estimateBytes(layout, 8192) > small, 'a bigger pass needs more');
  // One 16 × 512-token pass of this shape raised the RSS by ~480 MB when measured.
  t.ok(estimateBytes(layout, 8192) > 480 * 2 ** 20);
});

t.test('the memory estimate of an encoder-decoder speech model counts its decoder caches', async (t) => {
  // whisper-small's shape: 12 + 12 layers of width 768, 1500 encoder frames, 448 decoder tokens.
  const layout: OnnxLayout = {
    dir: '/m',
    dtype: 'fp32',
    weightsFiles: ['onnx/encoder_model.onnx', 'onnx/decoder_model_merged.onnx'],
    weightsBytes: 967_000_000,
    tokenizerBytes: 2_500_000,
    shape: shapeOf({ model_type: 'whisper', d_model: 768, encoder_layers: 12, encoder_attention_heads: 12, encoder_ffn_dim: 3072 }, 448),
    pooling: 'mean',
    head: { kind: 'whisper' },
    audio: { sampleRate: 16000, windowSeconds: 30, frameSamples: 320 },
    decoder: { layers: 12, maxTokens: 448, encoderFrames: 1500, vocabSize: 51865, melBins: 80, generation: {} },
  };
  t.match(layout.shape, { hiddenSize: 768, layers: 12, heads: 12, intermediateSize: 3072 }, "the encoder's shape from Whisper's names");
  const bytes = estimateBytes(layout, 4096);
  const caches = 12 * 2 * (448 + 1500) * 768 * 4;
  t.ok(bytes > 967_000_000 * 1.1 + 2_500_000 * 30 + caches, `${bytes} holds the weights, the tokenizer and the caches`);
  t.ok(estimateBytes({ ...layout, decoder: { ...layout.decoder!, layers: 24 } }, 4096) > bytes, 'more decoder layers, more cache');
});

t.test("normalizeWindow: the very floats of the library's Wav2Vec2FeatureExtractor", async (t) => {
  const lib = await transformers();
  const extractor = new lib.Wav2Vec2FeatureExtractor({ do_normalize: true, sampling_rate: 16000, feature_size: 1, padding_value: 0 });
  let seed = 7;
  const noise = new Float32Array(160_000).map(() => {
    seed = (Math.imul(seed, 1_664_525) + 1_013_904_223) >>> 0;
    return (seed / 2 ** 32) * 1.6 - 0.8 + 0.05;
  });
  const tone = new Float32Array(4_000).map((_, i) => 0.3 * Math.sin(i / 7));
  for (const [name, samples] of [
    ['noise with an offset', noise],
    ['a short tone', tone],
    ['silence', new Float32Array(1_000)],
    ['a constant', new Float32Array(1_000).fill(0.25)],
  ] as const) {
    const want = ((await extractor(samples)) as unknown as { input_values: { data: Float32Array } }).input_values.data;
    const got = normalizeWindow(samples);
    t.equal(got.length, want.length, name);
    let differing = 0;
    for (let i = 0; i < got.length; i++) if (!Object.is(got[i], want[i])) differing++;
    t.equal(differing, 0, `${name}: every sample the same float`);
  }
  const mean = noise.reduce((a, b) => a + b, 0) / noise.length;
  t.ok(Math.abs(mean) > 0.01, 'the noise had a mean to remove');
  const out = normalizeWindow(noise);
  t.ok(Math.abs(out.reduce((a, b) => a + b, 0) / out.length) < 1e-3, 'zero mean after');
});
