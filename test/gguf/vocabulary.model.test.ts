/**
 * Whether one GGUF can draft for another (plugins/gguf/vocabulary.ts, llama.cpp's rule): models
 * of one vocabulary pass, others are named by what differs.
 */
import t from 'tap';
import { vocabularyDifference } from '../../plugins/gguf/vocabulary.js';
import { fixture } from '../helpers/fixtures.js';

t.test('the same vocabulary drafts; another is named by its difference', async (t) => {
  const f = (name: string) => fixture(`gguf/${name}.gguf`);
  t.equal(await vocabularyDifference(f('stories260K'), f('stories260K')), null, 'a model drafts for itself');
  t.equal(await vocabularyDifference(f('stories260K'), f('stories260K-chatml')), null, 'another template, the same tokens');
  t.equal(await vocabularyDifference(f('bench-random-135m-q4_0'), f('llama-2-tiny-random')), null, "two models of Llama 2's 32,000 tokens");
  t.equal(await vocabularyDifference(f('stories260K'), f('tinystories-656k-q8_0')), '512 tokens against 2048');
  t.equal(await vocabularyDifference(f('bench-random-135m-q4_0'), f('synthetic-qwen3-tiny')), 'the tokenizer models are llama and gpt2');
});
