/**
 * Speculative decoding, decided once per request before a model is loaded for it: a draft model
 * (the request's `draft_model`, the model's Modelfile `DRAFT`, or the operator's
 * `engine.draftModels` entry for the model) or n-gram lookup (`draft_ngram`), and how many tokens
 * are drafted per step (`draft_num_predict`, Ollama's spelling). Like `num_ctx` it sizes the load:
 * the request that loads the model decides, and a loaded model keeps its speculation.
 *
 * What is checked here, for both GGUF engines alike:
 * - the draft is a stored model whose vocabulary is the model's (the format's `draftFits`): another
 *   vocabulary is a 400 naming both models;
 * - the engine that runs the model drafts that kind at all, and drafts as many tokens per step: a
 *   request that asks for more than its engine drafts is a 400 naming the engine and its limit; a
 *   stored parameter or the config's default is lowered to the limit instead (the model still loads).
 *
 * @module
 */
import { Errors } from 'lia/plugin';
import type { InferenceBackend, ModelFile, SamplingOptions, Speculation } from '../public.js';
import type { ResolvedModel } from 'lia/model-store';

/** The operator's defaults (config `engine.draftModels`, `engine.draftNumPredict`, `engine.draftNgram`). */
export interface SpeculationDefaults {
  /** A draft model per model name (both as stored, e.g. `llama3:8b` → `llama3:1b`). */
  draftModels: Readonly<Record<string, string>>;
  /** Tokens drafted per step when neither the request nor the model says. */
  draftNumPredict: number;
  /** The n-gram length of n-gram lookup for models without a draft; 0: off. */
  draftNgram: number;
}

/** What the plan needs besides the request: the store, the engine, and the format's vocabulary check. */
export interface SpeculationContext {
  defaults: SpeculationDefaults;
  /** Resolves a stored model by name (a 404 for an unknown one). */
  resolve(name: string): Promise<ResolvedModel>;
  /** The backend that would load `model`. */
  backend(model: ResolvedModel): Promise<InferenceBackend>;
  /** The format's check that `draft` shares `weights`' vocabulary (see `FormatHandler.draftFits`); absent: the format takes no draft. */
  draftFits: ((weights: ModelFile, draft: ModelFile) => Promise<string | null>) | undefined;
}

/**
 * The speculation of a request on `model` (`asked`: the name the client used; `options`: the
 * request's options over the model's stored parameters; `requested`: the request's own options,
 * to tell an explicit ask from a default). Undefined: none.
 */
export async function planSpeculation(
  model: ResolvedModel,
  asked: string,
  options: SamplingOptions,
  requested: SamplingOptions | undefined,
  ctx: SpeculationContext,
): Promise<Speculation | undefined> {
  if (model.remote) return undefined;
  const numPredict = options.draft_num_predict ?? ctx.defaults.draftNumPredict;
  if (numPredict === 0) return undefined;
  const draftName = options.draft_model || ctx.defaults.draftModels[model.name] || undefined;
  const ngram = options.draft_ngram ?? ctx.defaults.draftNgram;
  if (!draftName && ngram === 0) return undefined;
  const kind: Speculation['kind'] = draftName ? 'draft' : 'ngram';
  const backend = await ctx.backend(model);
  const can = backend.speculation;
  if (!can || !can.kinds.includes(kind)) {
    const what = kind === 'draft' ? 'a draft model' : 'n-gram lookup';
    throw Errors.badRequest(`"${asked}" runs on ${backend.name}, which does no speculative decoding with ${what}`, {
      param: kind === 'draft' ? 'draft_model' : 'draft_ngram',
    });
  }
  if (requested?.draft_num_predict !== undefined && requested.draft_num_predict > can.maxDraft) {
    throw Errors.badRequest(
      `draft_num_predict ${requested.draft_num_predict}: "${asked}" runs on ${backend.name}, which drafts at most ${can.maxDraft} token${can.maxDraft === 1 ? '' : 's'} per step` +
        (can.why ? ` (${can.why})` : ''),
      { param: 'draft_num_predict' },
    );
  }
  const maxDraft = Math.min(numPredict, can.maxDraft);
  if (kind === 'ngram') return { kind, ngram, maxDraft };
  const draft = await ctx.resolve(draftName!).catch((err: unknown) => {
    throw Errors.badRequest(`draft model "${draftName}" of "${asked}": ${err instanceof Error ? err.message : String(err)}`, { param: 'draft_model' });
  });
  await checkVocabulary(model, draft, ctx.draftFits);
  return { kind, draft: { name: draft.name, path: draft.modelPath, sizeBytes: draft.sizeBytes }, maxDraft };
}

/** Verdicts of the vocabulary check, by the two weights' digests (blobs never change). */
const verdicts = new Map<string, Promise<string | null>>();

/** The draft shares the model's vocabulary, or the request is a 400 naming both. */
async function checkVocabulary(model: ResolvedModel, draft: ResolvedModel, fits: SpeculationContext['draftFits']): Promise<void> {
  if (draft.remote || draft.format !== model.format || !fits) {
    throw Errors.badRequest(`"${draft.name}" cannot draft for "${model.name}": a draft model is a local model of the same format`, { param: 'draft_model' });
  }
  const key = `${model.modelPath}\n${draft.modelPath}`;
  let verdict = verdicts.get(key);
  if (!verdict) {
    verdict = fits(weightsFile(model), weightsFile(draft));
    verdict.catch(() => verdicts.delete(key));
    verdicts.set(key, verdict);
  }
  const problem = await verdict;
  if (problem) throw vocabularyError(draft.name, model.name, problem);
}

/** The 400 of a draft whose vocabulary is not the model's (also `/api/create`'s, for `DRAFT`). */
export function vocabularyError(draft: string, model: string, problem: string): Error {
  return Errors.badRequest(`"${draft}" cannot draft for "${model}": their vocabularies differ (${problem})`, { param: 'draft_model' });
}

function weightsFile(m: ResolvedModel): ModelFile {
  return { mediaType: '', digest: m.digest, size: m.sizeBytes, path: m.modelPath };
}

/** Whether two speculations are the same (a loaded model serves a request planned alike). */
export function sameSpeculation(a: Speculation | undefined, b: Speculation | undefined): boolean {
  if (!a || !b) return a === b;
  if (a.kind === 'draft' && b.kind === 'draft') return a.draft.path === b.draft.path && a.maxDraft === b.maxDraft;
  if (a.kind === 'ngram' && b.kind === 'ngram') return a.ngram === b.ngram && a.maxDraft === b.maxDraft;
  return false;
}
