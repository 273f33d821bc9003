/**
 * The `fake-backend` plugin: an inference backend without a model, for plugin authors who test a
 * route, an auth strategy or an API surface and need the engine to answer something.
 *
 * It serves the `fake` format: a model is one `*.fake` text file (create it with
 * `createFakeModel` from `lia/testing`). The model's text is a prefix; every answer is that
 * prefix followed by the prompt (`/api/generate`) or the last user message (`/api/chat`,
 * `/v1/chat/completions`), streamed word by word, so answers are predictable:
 *
 * ```
 * model text "fake says:"  +  prompt "hello there"  →  "fake says: hello there"
 * ```
 *
 * The plugin's `tokenDelayMs` option (default 0) pauses between words, for tests that need a
 * stream still flowing while they act. `options.num_predict` cuts the answer after that many words (`done_reason: "length"`). A model
 * created with a `template` that uses `.Thinking` has the `thinking` capability, so a prompt such
 * as `"<think> why </think> because"` exercises the engine's split of thinking and answer.
 * A scripted model (`createScriptedModel` from `lia/testing`; its text is {@link SCRIPT_MARK} and a
 * JSON {@link FakeScript}) calls tools instead: while the request offers the script's tools and
 * the conversation holds no tool result yet, it answers with the script's tool calls;
 * otherwise with the script's answer, where `{{result}}` stands for the last tool result's text,
 * so a test sees the result carried back. An agent's loop runs against it turn by turn.
 * Embeddings are deterministic 8-dimensional unit vectors derived from each input's SHA-256, so
 * equal inputs give equal vectors. A speech model (`createSpeechModel`; its text is
 * {@link SPEECH_MARK} and its window in seconds) has the `transcription` capability only and reads
 * out the audio the engine hands it: one word per 100 ms, the block's RMS level in thousandths
 * (`"0 212 305 0"`), each word timed by its block, so a test can compare what reached the model
 * with what it sent. A voice model (`createVoiceModel`; its text is `VOICE_MARK` and its voices)
 * has the `speech` capability only and speaks each character as 10 ms of tone (fake-voice.ts).
 * Nothing is loaded into memory; the model's size is its file's.
 *
 * @module
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { ChatParams, FormatHandler, GenerationEvent, InferenceBackend, LoadedModel, SamplingOptions, TranscribedWord, TranscribeResult } from 'lia/engine';
import { Errors } from '../errors.js';
import { definePlugin } from '../plugin/define.js';
import { Type } from '@sinclair/typebox';
import { fakeVoiceModel, voiceNames } from './fake-voice.js';

/** The media type of the layer that carries a fake model's text. */
export const FAKE_MEDIA_TYPE = 'application/vnd.lia.fake';

function words(text: string): string[] {
  return text.split(/\s+/).filter(Boolean);
}

/** The `fake` format: one `*.fake` file. */
export const fakeFormat: FormatHandler = {
  name: 'fake',
  mediaTypes: [FAKE_MEDIA_TYPE],
  layout: 'file',
  files: 'one .fake file',
  recognise(names) {
    if (!names.some((n) => n.endsWith('.fake'))) return null;
    return names.length === 1 ? {} : { problem: 'a fake model is exactly one .fake file' };
  },
  async describe({ weights, template }) {
    const text = await readFile(weights[0]!.path, 'utf8');
    const script = parseScript(text);
    if (speechWindow(text) !== null) {
      return { details: { family: 'fake', families: ['fake'], parameter_size: '1', quantization_level: 'none' }, capabilities: ['transcription'] };
    }
    const voices = voiceNames(text);
    if (voices) return { details: { family: 'fake', families: ['fake'], parameter_size: '1', quantization_level: 'none' }, capabilities: ['speech'], voices };
    return {
      details: { family: 'fake', families: ['fake'], parameter_size: String(words(text).length), quantization_level: 'none' },
      capabilities: ['completion', 'embedding', ...(script ? (['tools'] as const) : []), ...(template?.includes('.Thinking') ? (['thinking'] as const) : [])],
      modelInfo: { 'fake.prefix': text.trim() },
    };
  },
};

/** The first word of a fake speech model's text; the second is its window in seconds. */
export const SPEECH_MARK = '#fake-speech';

/** A fake speech model's window in seconds, or null for a text model. */
export function speechWindow(text: string): number | null {
  if (!text.startsWith(SPEECH_MARK)) return null;
  const seconds = Number(text.slice(SPEECH_MARK.length).trim());
  return Number.isFinite(seconds) && seconds > 0 ? seconds : 30;
}

/** The fake speech model's reading of a window: one word per 100 ms block, its RMS in thousandths. */
export function readOut(samples: Float32Array, sampleRate: number): TranscribeResult {
  const block = sampleRate / 10;
  const out: TranscribedWord[] = [];
  for (let start = 0; start < samples.length; start += block) {
    const end = Math.min(samples.length, start + block);
    let sum = 0;
    for (let i = start; i < end; i++) sum += samples[i]! * samples[i]!;
    out.push({ word: String(Math.round(Math.sqrt(sum / (end - start)) * 1000)), start: start / sampleRate, end: end / sampleRate });
  }
  return { text: out.map((w) => w.word).join(' '), words: out, tokens: out.map((_, i) => i), avgLogprob: 0, noSpeechProb: 0 };
}

/** The first line of a scripted fake model's text; the rest is a JSON {@link FakeScript}. */
export const SCRIPT_MARK = '#fake-script';

/** What a scripted fake model does (see the module comment). */
export interface FakeScript {
  /** The calls it makes, in one turn, when the request offers every tool they name. */
  toolCalls: Array<{ name: string; arguments: Record<string, unknown> }>;
  /** The answer once a tool result came back (or when the tools are not offered); `{{result}}` is the last tool result's text. */
  answer: string;
}

/** The script in a fake model's text, or null for a plain prefix model. */
export function parseScript(text: string): FakeScript | null {
  if (!text.startsWith(`${SCRIPT_MARK}\n`)) return null;
  return JSON.parse(text.slice(SCRIPT_MARK.length + 1)) as FakeScript;
}

/** A scripted model's turn: its tool calls, or its answer. */
async function* scripted(script: FakeScript, params: ChatParams, signal: AbortSignal, delayMs = 0): AsyncIterable<GenerationEvent> {
  const answered = params.messages.some((m) => m.role === 'tool');
  const offered = new Set((params.tools ?? []).map((t) => t.function.name));
  if (!answered && script.toolCalls.length > 0 && script.toolCalls.every((c) => offered.has(c.name))) {
    if (signal.aborted) throw signal.reason;
    const calls = script.toolCalls.map((c, index) => ({
      id: `call_${index}_${Date.now().toString(36)}`,
      function: { index, name: c.name, arguments: c.arguments },
    }));
    yield { type: 'tool_calls', calls };
    yield { type: 'done', reason: 'stop', promptTokens: 1, completionTokens: 1, promptEvalNs: 1000, evalNs: 1000 };
    return;
  }
  const result = params.messages.findLast((m) => m.role === 'tool')?.content.trim() ?? '';
  yield* answer('', script.answer.replaceAll('{{result}}', result), params.options, signal, delayMs);
}

/** Streams `prefix + input` word by word, honouring `num_predict` and the abort signal. */
async function* answer(prefix: string, input: string, options: SamplingOptions, signal: AbortSignal, delayMs = 0): AsyncIterable<GenerationEvent> {
  const all = [...words(prefix), ...words(input)];
  const limit = options.num_predict !== undefined && options.num_predict >= 0 ? options.num_predict : Infinity;
  const out = all.slice(0, limit);
  for (const [i, w] of out.entries()) {
    if (delayMs > 0) await new Promise((r) => setTimeout(r, delayMs));
    // Like a real backend, a cancelled generation ends with the signal's reason, not a silent end.
    if (signal.aborted) throw signal.reason;
    yield { type: 'token', text: i === 0 ? w : ` ${w}` };
  }
  const reason = out.length < all.length ? 'length' : 'stop';
  yield { type: 'done', reason, promptTokens: words(input).length, completionTokens: out.length, promptEvalNs: 1000, evalNs: 1000 * Math.max(1, out.length) };
}

/** A unit vector of `dims` (at most 32) numbers derived from the text's SHA-256. */
function vector(text: string, dims: number): number[] {
  const bytes = createHash('sha256').update(text).digest();
  const raw = Array.from({ length: Math.min(dims, 32) }, (_, i) => bytes[i]! / 255 - 0.5);
  const norm = Math.hypot(...raw) || 1;
  return raw.map((x) => x / norm);
}

/** The backend with a pause of `tokenDelayMs` between streamed words. */
export function fakeBackendWith({ tokenDelayMs = 0 }: { tokenDelayMs?: number } = {}): InferenceBackend {
  return {
    ...fakeInferenceBackend,
    load: async (model, options) => {
      const loaded = await fakeInferenceBackend.load(model, options);
      const prefix = await readFile(model.modelPath, 'utf8');
      const script = parseScript(prefix);
      return {
        ...loaded,
        generate: (params, signal) => answer(script ? '' : prefix, script ? script.answer : params.prompt, params.options, signal, tokenDelayMs),
        chat: (params, signal) =>
          script
            ? scripted(script, params, signal, tokenDelayMs)
            : answer(prefix, params.messages.findLast((m) => m.role === 'user')?.content ?? '', params.options, signal, tokenDelayMs),
      };
    },
  };
}

/** The backend itself, for tests that register it on their own. */
export const fakeInferenceBackend: InferenceBackend = {
  name: 'fake',
  formats: [fakeFormat],
  async estimateMemory(model) {
    return { totalBytes: model.sizeBytes, vramBytes: 0 };
  },
  async load(model, options): Promise<LoadedModel> {
    const prefix = await readFile(model.modelPath, 'utf8');
    const script = parseScript(prefix);
    const window = speechWindow(prefix);
    const voices = voiceNames(prefix);
    if (voices) return fakeVoiceModel(voices, model.sizeBytes);
    if (window !== null) {
      const refuse = () => {
        throw Errors.badRequest('a fake speech model only transcribes');
      };
      return {
        capabilities: ['transcription'],
        contextLength: 0,
        sizeBytes: model.sizeBytes,
        vramBytes: 0,
        audio: { sampleRate: 16000, windowSeconds: window },
        transcribe: async (params) => readOut(params.samples, 16000),
        generate: refuse,
        chat: refuse,
        embed: async () => refuse(),
        unload: async () => undefined,
      };
    }
    return {
      capabilities: ['completion', 'embedding', ...(script ? (['tools'] as const) : [])],
      contextLength: options.contextLength ?? 4096,
      sizeBytes: model.sizeBytes,
      vramBytes: 0,
      generate: (params, signal) => answer(script ? '' : prefix, script ? script.answer : params.prompt, params.options, signal),
      chat: (params, signal) =>
        script ? scripted(script, params, signal) : answer(prefix, params.messages.findLast((m) => m.role === 'user')?.content ?? '', params.options, signal),
      embed: async (params) => {
        if (params.inputs.some((i) => i.length === 0)) throw Errors.badRequest('the fake backend cannot embed an empty input');
        return {
          embeddings: params.inputs.map((i) => vector(i, params.dimensions ?? 8)),
          promptTokens: params.inputs.reduce((n, i) => n + words(i).length, 0),
        };
      },
      unload: async () => undefined,
    };
  },
};

/** The plugin: enable it with `plugins: { 'fake-backend': FAKE_BACKEND }` (see `lia/testing`). */
export default definePlugin({
  name: 'fake-backend',
  apiVersion: 2,
  description: 'A model-less inference backend for tests (the "fake" format: echoes the prompt after a fixed prefix)',
  options: Type.Object(
    { tokenDelayMs: Type.Integer({ minimum: 0, maximum: 1000, default: 0, description: 'Pause between streamed words, in ms. Defaults to 0.' }) },
    { additionalProperties: false },
  ),
  setup(_app, ctx) {
    ctx.hooks.extensions.get('backends').register(ctx.options.tokenDelayMs > 0 ? fakeBackendWith(ctx.options) : fakeInferenceBackend, ctx.name);
  },
});
