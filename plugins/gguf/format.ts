/**
 * The `gguf` model format as the llama.cpp backend serves it: one file, stored as Ollama stores it
 * (one `application/vnd.ollama.image.model` layer, no file name), loaded from its blob. Its
 * capabilities follow Ollama: `embedding` when the GGUF declares a pooling type, else
 * `completion`; `rerank` instead for a reranker (pooling type RANK or a `cls` classification
 * head); `tools` when the template layer uses `.Tools` or the GGUF chat template mentions
 * `tools`; `insert` for `.Suffix`; `thinking` for `.Thinking` in the template layer or, in the
 * GGUF's Jinja chat template, a `<think>` section or an `enable_thinking` switch (Qwen3, QwQ,
 * DeepSeek-R1; see {@link jinjaThinks}); `vision` and `audio` with a projector layer, as its
 * encoders say (`clip.has_vision_encoder`, `clip.has_audio_encoder`; a projector that declares
 * neither is an older vision one).
 *
 * @module
 */
import type { FormatHandler } from 'lia/engine';
import type { ModelCapability } from 'lia/model-store';
import type { ModelFile } from 'lia/engine';
import { estimateBytes, fileBytes, kvCacheFits, offloadCosts, readShape } from './estimate.js';
import { readGguf, type GgufSummary } from './summary.js';
import { readGgufHeader } from './header.js';
import { vocabularyDifference } from './vocabulary.js';

/** Ollama's layer types: the weights, and the vision projector that may come with them. */
export const GGUF_MEDIA_TYPE = 'application/vnd.ollama.image.model';
const PROJECTOR_MEDIA_TYPE = 'application/vnd.ollama.image.projector';
const ADAPTER_MEDIA_TYPE = 'application/vnd.ollama.image.adapter';

/** llama.cpp's prompt batch when a load gives none. */
const DEFAULT_BATCH = 512;

/** Creates the handler; header summaries are cached by blob digest (blobs never change). */
export function ggufFormat(): FormatHandler {
  const summaries = new Map<string, Promise<GgufSummary>>();
  const summary = (file: ModelFile): Promise<GgufSummary> => {
    let p = summaries.get(file.digest);
    if (!p) {
      p = readGguf(file.path);
      p.catch(() => summaries.delete(file.digest));
      summaries.set(file.digest, p);
    }
    return p;
  };
  return {
    name: 'gguf',
    mediaTypes: [GGUF_MEDIA_TYPE],
    layout: 'file',
    files: 'one .gguf file',
    recognise(names) {
      if (!names.some((n) => n.endsWith('.gguf'))) return null;
      // One file, or the weights and their projector (Ollama's two FROM lines).
      if (names.length === 1 || (names.length === 2 && names.every((n) => n.endsWith('.gguf')))) return {};
      return { problem: 'a GGUF model is created from one .gguf file, or two: the weights and a vision or audio projector (mmproj)' };
    },
    projector: {
      mediaType: PROJECTOR_MEDIA_TYPE,
      /** A CLIP GGUF (`general.architecture` `clip`): what llama.cpp's mtmd loads with `--mmproj`. */
      async is(file) {
        return (await summary(file)).modelInfo['general.architecture'] === 'clip';
      },
    },
    adapter: {
      mediaType: ADAPTER_MEDIA_TYPE,
      /** A GGUF LoRA (`general.type` `adapter`, `adapter.type` `lora`) of the weights' architecture, as llama.cpp loads it. */
      async check(file, weights) {
        const [adapter, base] = await Promise.all([summary(file).catch(() => null), summary(weights)]);
        if (!adapter) return 'not a GGUF file';
        const info = adapter.modelInfo;
        if (info['general.type'] !== 'adapter' || info['adapter.type'] !== 'lora')
          return 'not a GGUF LoRA adapter (general.type "adapter", adapter.type "lora")';
        const arch = info['general.architecture'];
        const want = base.modelInfo['general.architecture'];
        if (arch !== want) return `it is for the ${String(arch)} architecture, and the model's weights are ${String(want)}`;
        return null;
      },
    },
    async describe({ weights, layers, template, verbose }) {
      const file = weights[weights.length - 1]!;
      const gguf = verbose ? await readGguf(file.path, { verbose: true }) : await summary(file);
      const capabilities: ModelCapability[] = [gguf.ranking ? 'rerank' : gguf.pooling ? 'embedding' : 'completion'];
      const goTemplate = template ?? '';
      if (goTemplate.includes('.Tools') || /\btools\b/.test(gguf.chatTemplate ?? '')) capabilities.push('tools');
      if (goTemplate.includes('.Suffix')) capabilities.push('insert');
      if (goTemplate.includes('.Thinking') || jinjaThinks(gguf.chatTemplate)) capabilities.push('thinking');
      const projector = layers.find((l) => l.mediaType === PROJECTOR_MEDIA_TYPE);
      if (projector) capabilities.push(...encoders((await summary(projector)).modelInfo));
      return { details: gguf.details, capabilities, modelInfo: gguf.modelInfo };
    },
    async chatTemplate(model) {
      const { metadata } = await readGgufHeader(model.modelPath);
      const jinja = metadata.get('tokenizer.chat_template');
      return typeof jinja === 'string' && jinja.trim() !== '' ? jinja : null;
    },
    async footprint(model, options) {
      const files = [model.modelPath, ...(model.projectorPath ? [model.projectorPath] : [])];
      const [shape, ...sizes] = await Promise.all([readShape(model.modelPath), ...files.map(fileBytes)]);
      const bytes = sizes.reduce((a, b) => a + b, 0);
      return estimateBytes(shape, bytes, {
        contextLength: options.contextLength ?? 0,
        parallel: options.parallel,
        batchSize: options.batchSize ?? DEFAULT_BATCH,
        kvCacheType: options.kvCacheType,
      });
    },
    /** llama.cpp's rule for a draft model (vocabulary.ts): the same tokenizer and tokens. */
    draftFits(weights, draft) {
      return vocabularyDifference(weights.path, draft.path);
    },
    async kvCacheFits(model, type) {
      return kvCacheFits(await readShape(model.modelPath), type);
    },
    async offloadCosts(model, options) {
      return offloadCosts(await readShape(model.modelPath), {
        contextLength: options.contextLength ?? 0,
        parallel: options.parallel,
        batchSize: options.batchSize ?? DEFAULT_BATCH,
        kvCacheType: options.kvCacheType,
      });
    },
  };
}

/**
 * Whether a GGUF Jinja chat template is a thinking model's: it writes or strips a `<think>`
 * section (the tag the engine splits the output on) or takes `enable_thinking`. The runner's chat
 * format agrees for the families node-llama-cpp knows (its Qwen and DeepSeek wrappers have a
 * thought section), and this needs no model load, so `/api/show` can answer at once.
 */
export function jinjaThinks(template: string | undefined): boolean {
  return template !== undefined && (template.includes('<think>') || /\benable_thinking\b/.test(template));
}

/** What a projector's encoders let the model take: images, audio, or both. */
function encoders(info: Record<string, unknown>): ModelCapability[] {
  const audio = info['clip.has_audio_encoder'] === true;
  const vision = info['clip.has_vision_encoder'] === true || (!audio && info['clip.has_vision_encoder'] === undefined);
  return [...(vision ? (['vision'] as const) : []), ...(audio ? (['audio'] as const) : [])];
}
