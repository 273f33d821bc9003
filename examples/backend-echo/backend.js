// @ts-check
/**
 * The echo format and backend. Types come from `lia/plugin` and `lia/plugin/contracts` (JSDoc),
 * so an editor or `tsc --checkJs` checks this file against the contracts the running LIA
 * implements.
 */
import { readFile } from 'node:fs/promises';
import { Errors } from 'lia/plugin';

/** @typedef {import('lia/engine').FormatHandler} FormatHandler */
/** @typedef {import('lia/engine').InferenceBackend} InferenceBackend */
/** @typedef {import('lia/engine').LoadedModel} LoadedModel */
/** @typedef {import('lia/engine').GenerationEvent} GenerationEvent */
/** @typedef {import('lia/engine').ChatMessage} ChatMessage */
/** @typedef {import('lia/engine').SamplingOptions} SamplingOptions */
/** @typedef {{ repeat: number, tokenDelayMs: number }} EchoOptions */

/** The media type of the manifest layer that carries an echo model's file. */
export const ECHO_MEDIA_TYPE = 'application/vnd.lia-backend-echo.model';

/** @param {string} text */
function words(text) {
  return text.split(/\s+/).filter(Boolean);
}

/** @type {FormatHandler} */
export const echoFormat = {
  name: 'echo',
  mediaTypes: [ECHO_MEDIA_TYPE],
  layout: 'file',
  files: 'one .echo file',
  recognise(names) {
    if (!names.some((n) => n.endsWith('.echo'))) return null;
    return names.length === 1 ? {} : { problem: 'an echo model is exactly one .echo file' };
  },
  async describe({ weights }) {
    const file = weights[0];
    if (!file) throw Errors.badRequest('an echo model needs its .echo file');
    const text = await readFile(file.path, 'utf8');
    if (text.includes('\0')) throw Errors.badRequest('an .echo file is text; this one is binary');
    return {
      details: { family: 'echo', families: ['echo'], parameter_size: `${words(text).length}`, quantization_level: 'none' },
      capabilities: ['completion'],
      modelInfo: { 'echo.prefix': text.trim() },
    };
  },
};

/**
 * Renders a conversation as a plain transcript, one `role: content` line per message, ending
 * with `assistant:`: what a chat template does for a real model.
 * @param {ChatMessage[]} messages
 */
export function renderChat(messages) {
  return [...messages.map((m) => `${m.role}: ${m.content}`), 'assistant:'].join('\n');
}

/** @param {number} ms @param {AbortSignal} signal */
function pause(ms, signal) {
  if (ms === 0 || signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => (clearTimeout(timer), resolve(undefined)), { once: true });
  });
}

/**
 * Streams the answer word by word; `num_predict` cuts it (reason `length`).
 * @param {string[]} answer @param {number} promptTokens @param {SamplingOptions} options
 * @param {EchoOptions} echo @param {AbortSignal} signal
 * @returns {AsyncIterable<GenerationEvent>}
 */
async function* stream(answer, promptTokens, options, echo, signal) {
  const started = process.hrtime.bigint();
  const limit = options.num_predict !== undefined && options.num_predict >= 0 ? options.num_predict : answer.length;
  const out = answer.slice(0, limit);
  for (const [i, word] of out.entries()) {
    await pause(echo.tokenDelayMs, signal);
    if (signal.aborted) return;
    yield { type: 'token', text: i === 0 ? word : ` ${word}` };
  }
  const evalNs = Number(process.hrtime.bigint() - started);
  yield { type: 'done', reason: out.length < answer.length ? 'length' : 'stop', promptTokens, completionTokens: out.length, promptEvalNs: 1, evalNs };
}

/**
 * The backend: loading an echo model reads its file; nothing stays in memory but that text.
 * @param {EchoOptions} echo
 * @returns {InferenceBackend}
 */
export function createEchoBackend(echo) {
  return {
    name: 'echo',
    formats: [echoFormat],
    async estimateMemory(model) {
      return { totalBytes: model.sizeBytes, vramBytes: 0 };
    },
    async load(model, options) {
      const prefix = words(await readFile(model.modelPath, 'utf8'));
      /** @param {string} input */
      const answer = (input) => [...prefix, ...Array.from({ length: echo.repeat }, () => words(input)).flat()];
      /** @type {LoadedModel} */
      const loaded = {
        capabilities: ['completion'],
        contextLength: options.contextLength ?? 2048,
        sizeBytes: model.sizeBytes,
        vramBytes: 0,
        generate(params, signal) {
          const prompt = params.system ? `${params.system}\n${params.prompt}` : params.prompt;
          return stream(answer(params.prompt), words(prompt).length, params.options, echo, signal);
        },
        chat(params, signal) {
          const last = params.messages.findLast((m) => m.role === 'user');
          return stream(answer(last?.content ?? ''), words(renderChat(params.messages)).length, params.options, echo, signal);
        },
        async embed() {
          throw Errors.badRequest('echo models do not embed');
        },
        async unload() {},
      };
      return loaded;
    },
  };
}
