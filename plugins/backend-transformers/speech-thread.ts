/**
 * The inside of a speech model's worker thread (speech-worker.ts starts it): it loads the model
 * here with the same loaders as before (ctc.ts, whisper.ts, moonshine.ts, vits.ts), so
 * onnxruntime's passes, and the tokenising, feature extraction and decoding around them, run on
 * this thread's event loop and not the appliance's. It answers the calls the main thread
 * forwards, one message each way ({@link ToThread}, {@link FromThread}); an `abort` aborts the
 * call's signal here; `unload` unloads the model (waiting for the pass in flight) and answers once
 * done, and the main thread then ends the thread.
 *
 * @module
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { FastifyBaseLogger } from 'fastify';
import { isAppError } from 'lia/plugin';
import type { LoadedModel } from 'lia/engine';
import type { ResolvedModel } from 'lia/model-store';
import { loadCtc } from './ctc.js';
import type { OnnxLayout } from './layout.js';
import type { EncoderSettings } from './model.js';
import { loadMoonshine } from './moonshine.js';
import { loadVits } from './vits.js';
import { loadWhisper } from './whisper.js';

/** What the main thread hands a new thread (`workerData`). */
export interface ThreadData {
  model: ResolvedModel;
  layout: OnnxLayout;
  settings: EncoderSettings;
}

/** The calls forwarded to the thread: the speech and tokenizer members of {@link LoadedModel}. */
export type ThreadMethod = 'synthesize' | 'transcribe' | 'tokenize' | 'detokenize';

/** A message to the thread. */
export type ToThread = { type: 'call'; id: number; method: ThreadMethod; arg: unknown } | { type: 'abort'; id: number } | { type: 'unload' };

/** An error as it crosses the thread: an AppError keeps its code, status, message, param and headers. */
export interface ThreadError {
  message: string;
  app?: { code: string; statusCode: number; param: string | null; headers: Record<string, string> };
}

/** A message from the thread. */
export type FromThread =
  | { type: 'loaded'; capabilities: LoadedModel['capabilities']; contextLength: number; audio?: LoadedModel['audio']; speech?: LoadedModel['speech'] }
  | { type: 'result'; id: number; value: unknown }
  | { type: 'error'; id: number | null; error: ThreadError }
  | { type: 'log'; level: 'warn'; obj: Record<string, unknown>; msg: string }
  | { type: 'unloaded' };

/** An error in the shape that crosses the thread. */
export function toThreadError(err: unknown): ThreadError {
  const message = err instanceof Error ? err.message : String(err);
  if (!isAppError(err)) return { message };
  return { message, app: { code: err.code, statusCode: err.statusCode, param: err.param, headers: err.headers } };
}

const port = parentPort;
if (!port) throw new Error('speech-thread.ts runs as a worker thread (speech-worker.ts starts it)');
const { model, layout, settings } = workerData as ThreadData;
const send = (message: FromThread, transfer: ArrayBuffer[] = []) => port.postMessage(message, transfer);

/** The loader's warnings reach the appliance's log. */
const log = { warn: (obj: Record<string, unknown>, msg: string) => send({ type: 'log', level: 'warn', obj, msg }) } as unknown as FastifyBaseLogger;

async function load(): Promise<LoadedModel> {
  const kind = layout.head.kind;
  if (kind === 'ctc') return loadCtc(model, layout, settings);
  if (kind === 'whisper') return loadWhisper(model, layout, settings);
  if (kind === 'moonshine') return loadMoonshine(model, layout, settings);
  if (kind === 'vits') return loadVits(model, layout, settings, log);
  throw new Error(`a ${kind} model does not run in a speech thread`);
}

const calls = new Map<number, AbortController>();

async function call(loaded: LoadedModel, id: number, method: ThreadMethod, arg: unknown): Promise<void> {
  const aborter = new AbortController();
  calls.set(id, aborter);
  try {
    const signal = aborter.signal;
    const value =
      method === 'synthesize'
        ? await loaded.synthesize!(arg as Parameters<NonNullable<LoadedModel['synthesize']>>[0], signal)
        : method === 'transcribe'
          ? await loaded.transcribe!(arg as Parameters<NonNullable<LoadedModel['transcribe']>>[0], signal)
          : method === 'tokenize'
            ? await loaded.tokenize!(arg as Parameters<NonNullable<LoadedModel['tokenize']>>[0], signal)
            : await loaded.detokenize!(arg as number[], signal);
    // A waveform is handed over, not copied.
    const samples = (value as { samples?: unknown }).samples;
    send({ type: 'result', id, value }, samples instanceof Float32Array ? [samples.buffer as ArrayBuffer] : []);
  } catch (err) {
    send({ type: 'error', id, error: toThreadError(err) });
  } finally {
    calls.delete(id);
  }
}

try {
  const loaded = await load();
  port.on('message', (message: ToThread) => {
    if (message.type === 'call') void call(loaded, message.id, message.method, message.arg);
    else if (message.type === 'abort') calls.get(message.id)?.abort();
    else
      void loaded.unload().then(
        () => send({ type: 'unloaded' }),
        (err: unknown) => send({ type: 'error', id: null, error: toThreadError(err) }),
      );
  });
  send({
    type: 'loaded',
    capabilities: loaded.capabilities,
    contextLength: loaded.contextLength,
    ...(loaded.audio ? { audio: loaded.audio } : {}),
    ...(loaded.speech ? { speech: loaded.speech } : {}),
  });
} catch (err) {
  send({ type: 'error', id: null, error: toThreadError(err) });
}
