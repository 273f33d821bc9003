/**
 * The request plan's speculative decoding (plugins/engine/plan/speculation.ts): which kind, how many
 * tokens per step, where the defaults come from, and the 400s before any model is loaded (an
 * engine that drafts fewer tokens or none of that kind, a draft of another vocabulary).
 */
import t from 'tap';
import type { InferenceBackend, ModelFile, SamplingOptions } from 'lia/engine';
import type { ResolvedModel } from 'lia/model-store';
import { planSpeculation, sameSpeculation, type SpeculationContext } from '../../plugins/engine/plan/speculation.js';
import { parseSamplingOptions } from '../../plugins/engine/request-options.js';

const model = (name: string, path = `/blobs/${name}`): ResolvedModel =>
  ({ name, digest: `sha256:${name}`, format: 'gguf', modelPath: path, sizeBytes: 1000, capabilities: ['completion'] }) as unknown as ResolvedModel;
const target = model('big:latest');
const server = { name: 'llama-server', speculation: { kinds: ['draft', 'ngram'], maxDraft: 64 } } as unknown as InferenceBackend;
const library = { name: 'llama-cpp', speculation: { kinds: ['draft', 'ngram'], maxDraft: 1, why: 'its predictor' } } as unknown as InferenceBackend;
const none = { name: 'transformers' } as unknown as InferenceBackend;

function context(backend: InferenceBackend, over: Partial<SpeculationContext> = {}): SpeculationContext & { checked: string[] } {
  const checked: string[] = [];
  return {
    defaults: { draftModels: {}, draftNumPredict: 3, draftNgram: 0 },
    resolve: async (name) => {
      if (name === 'missing') throw new Error('model "missing" not found');
      return model(name.includes(':') ? name : `${name}:latest`);
    },
    backend: async () => backend,
    draftFits: async (weights: ModelFile, draft: ModelFile) => {
      checked.push(`${weights.path} ${draft.path}`);
      return draft.path.includes('alien') ? '512 tokens against 2048' : null;
    },
    checked,
    ...over,
  };
}

const plan = (options: SamplingOptions, ctx: SpeculationContext, requested?: SamplingOptions) => planSpeculation(target, 'big', options, requested, ctx);

t.test('a draft model from the request, the model or the config; n-gram lookup otherwise', async (t) => {
  t.equal(await plan({}, context(server)), undefined, 'nothing asked: no speculation');
  t.same(await plan({ draft_model: 'small' }, context(server)), {
    kind: 'draft',
    draft: { name: 'small:latest', path: '/blobs/small:latest', sizeBytes: 1000 },
    maxDraft: 3,
  });
  const configured = context(server, { defaults: { draftModels: { 'big:latest': 'tiny' }, draftNumPredict: 5, draftNgram: 0 } });
  t.match(await plan({}, configured), { kind: 'draft', draft: { name: 'tiny:latest' }, maxDraft: 5 }, "the operator's draftModels and draftNumPredict");
  t.match(await plan({ draft_model: 'small' }, configured), { draft: { name: 'small:latest' } }, "the model's or the request's draft wins");
  t.same(await plan({ draft_ngram: 3, draft_num_predict: 8 }, context(server)), { kind: 'ngram', ngram: 3, maxDraft: 8 });
  t.match(await plan({ draft_model: 'small', draft_ngram: 3 }, context(server)), { kind: 'draft' }, 'a draft model wins over n-gram lookup');
  t.equal(await plan({ draft_model: 'small', draft_num_predict: 0 }, context(server)), undefined, 'draft_num_predict 0 switches it off');
  const remote = { ...target, remote: { host: 'https://up', model: 'm' } } as unknown as ResolvedModel;
  t.equal(await planSpeculation(remote, 'big', { draft_model: 'small' }, undefined, context(server)), undefined, 'a remote model plans its own');
});

t.test('the engine: tokens per step and kinds it drafts', async (t) => {
  t.match(await plan({ draft_model: 'small' }, context(library)), { maxDraft: 1 }, 'the default is lowered to what the engine drafts');
  t.match(await plan({ draft_model: 'small', draft_num_predict: 4 }, context(library), {}), { maxDraft: 1 }, 'so is a stored parameter');
  await t.rejects(plan({ draft_model: 'small', draft_num_predict: 4 }, context(library), { draft_num_predict: 4 }), {
    statusCode: 400,
    message: 'draft_num_predict 4: "big" runs on llama-cpp, which drafts at most 1 token per step (its predictor)',
  });
  await t.rejects(plan({ draft_ngram: 2 }, context(none)), {
    statusCode: 400,
    message: '"big" runs on transformers, which does no speculative decoding with n-gram lookup',
  });
});

t.test('the draft: a stored model with the same vocabulary', async (t) => {
  const ctx = context(server);
  await plan({ draft_model: 'fresh' }, ctx);
  await plan({ draft_model: 'fresh' }, ctx);
  t.same(ctx.checked, ['/blobs/big:latest /blobs/fresh:latest'], 'checked once per pair of weights (blobs never change)');
  await t.rejects(plan({ draft_model: 'alien' }, ctx), {
    statusCode: 400,
    message: '"alien:latest" cannot draft for "big:latest": their vocabularies differ (512 tokens against 2048)',
  });
  await t.rejects(plan({ draft_model: 'missing' }, ctx), { statusCode: 400, message: /draft model "missing" of "big": model "missing" not found/ });
  await t.rejects(plan({ draft_model: 'small' }, context(server, { draftFits: undefined })), {
    statusCode: 400,
    message: /a draft model is a local model of the same format/,
  });
});

t.test('two plans alike are served by one load', async (t) => {
  const a = await plan({ draft_model: 'small' }, context(server));
  t.ok(sameSpeculation(a, await plan({ draft_model: 'small' }, context(server))));
  t.notOk(sameSpeculation(a, await plan({ draft_model: 'small', draft_num_predict: 4 }, context(server))));
  t.notOk(sameSpeculation(a, undefined));
  t.ok(sameSpeculation(undefined, undefined));
});

t.test('the options: Ollama spellings, bounds, stored parameters', async (t) => {
  t.same(parseSamplingOptions({ draft_model: ' small ', draft_num_predict: 4, draft_ngram: 2 }), {
    draft_model: 'small',
    draft_num_predict: 4,
    draft_ngram: 2,
  });
  t.throws(() => parseSamplingOptions({ draft_num_predict: 65 }), { statusCode: 400, message: 'option "draft_num_predict" must be between 0 and 64' });
  t.throws(() => parseSamplingOptions({ draft_ngram: 33 }), { statusCode: 400, message: 'option "draft_ngram" must be between 0 and 32' });
  t.throws(() => parseSamplingOptions({ draft_model: 3 }), { statusCode: 400, message: 'option "draft_model" must be of type string' });
  t.same(parseSamplingOptions({ draft_num_predict: 99, draft_model: 'small' }, false), { draft_model: 'small' }, 'a stored parameter past a bound is left out');
});
