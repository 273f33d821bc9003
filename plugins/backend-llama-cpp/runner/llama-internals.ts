/**
 * The one place the runner reaches past node-llama-cpp's public API. Every other runner file uses
 * the library's exports and the functions here; each function below says which private
 * (`@internal`) member it touches, what it patches and why.
 *
 * Members used, as found in node-llama-cpp {@link CHECKED_VERSION}:
 * - `LlamaContext._ctx`, the native addon context: `initBatch`, `decodeBatch`, `setThreads`
 *   ({@link wrapNativeBatch}, {@link hookDecodeQueue});
 * - `LlamaContext._decodeTokens`, `_queuedDecodes`, `_queuedDecodeSequenceIds`, `_scheduleDecode`:
 *   the decode queue its dispatch loop packs into batches ({@link hookDecodeQueue});
 * - `LlamaContextSequence._sequenceId` ({@link sequenceId}) and `_copyStateFromOtherSequence`
 *   ({@link copyPrefix}).
 *
 * Every function checks the shapes it needs before it changes anything and returns null, false or
 * undefined (changing nothing) when they are not there, so another release degrades to the
 * library's own behaviour, with a warning, rather than failing. The checks cannot see a member that
 * kept its shape but changed its meaning: test/engine/llama-internals-contract.model.test.ts exercises
 * each assumption on a real model, and docs/engine.md ("node-llama-cpp internals") says how to
 * review a new release.
 *
 * @module
 */
import { getModuleVersion, type LlamaContext, type LlamaContextSequence } from 'node-llama-cpp';

/** The node-llama-cpp release every assumption in this file was checked against. */
export const CHECKED_VERSION = '3.22.1';

/**
 * A warning for the operator when the installed node-llama-cpp (read with the library's public
 * `getModuleVersion`, or `installed`) is not {@link CHECKED_VERSION}; null when it is.
 */
export async function versionWarning(installed?: string): Promise<string | null> {
  const version = installed ?? (await getModuleVersion());
  if (version === CHECKED_VERSION) return null;
  return (
    `node-llama-cpp ${version} is installed, but the runner's patches of its internals (runner/llama-internals.ts) ` +
    `were checked against ${CHECKED_VERSION}: run test/engine/llama-internals-contract.model.test.ts and see docs/engine.md, "node-llama-cpp internals"`
  );
}

/** The native batch calls of a context, bound to it. */
export interface NativeBatch {
  /** Starts a batch of `size` tokens. */
  initBatch(size: number): unknown;
  /** Decodes the batch started last: one `llama_decode`. */
  decodeBatch(): Promise<unknown>;
  /** Sets the CPU thread count of the decodes that follow (`llama_set_n_threads`). */
  setThreads(threads: number): unknown;
}

/** The native addon object (`LlamaContext._ctx`) with the batch calls, unbound. */
type NativeObject = object & {
  initBatch(this: NativeObject, size: number): unknown;
  decodeBatch(this: NativeObject): Promise<unknown>;
  setThreads(this: NativeObject, threads: number): unknown;
};

/** `LlamaContext._ctx` when it has the batch calls, else null. */
function nativeOf(context: LlamaContext): NativeObject | null {
  const native = (context as unknown as { _ctx?: unknown })._ctx;
  if (!native || typeof native !== 'object') return null;
  const { initBatch, decodeBatch, setThreads } = native as Partial<Record<keyof NativeObject, unknown>>;
  if (typeof initBatch !== 'function' || typeof decodeBatch !== 'function' || typeof setThreads !== 'function') return null;
  return native as NativeObject;
}

/**
 * Replaces the native context's `initBatch` and/or `decodeBatch` (private `LlamaContext._ctx`, the
 * addon object the library's dispatch loop calls once per batch) for every caller: own properties
 * on the native object shadow its prototype's read-only methods. `wrap` receives the calls as they
 * are now (the native ones, or an earlier wrapper's, so wrappers stack) and returns the
 * replacements. False, and no change, when the native context lacks any of the batch calls.
 *
 * Why: node-llama-cpp has one thread count for every decode and no hook around a decode;
 * batch-threads.ts uses this to give large batches their own count (llama.cpp's
 * `n_threads_batch`), batching.ts (through {@link hookDecodeQueue}) to count decodes.
 */
export function wrapNativeBatch(context: LlamaContext, wrap: (current: NativeBatch) => Partial<Pick<NativeBatch, 'initBatch' | 'decodeBatch'>>): boolean {
  const native = nativeOf(context);
  if (!native) return false;
  // The native methods as they are now, before `wrap`'s replacements are installed below.
  const initBatch = native.initBatch.bind(native);
  const decodeBatch = native.decodeBatch.bind(native);
  const setThreads = native.setThreads.bind(native);
  const current: NativeBatch = {
    initBatch: (size) => initBatch(size),
    decodeBatch: () => decodeBatch(),
    setThreads: (threads) => setThreads(threads),
  };
  for (const [name, value] of Object.entries(wrap(current))) {
    if (typeof value === 'function') Object.defineProperty(native, name, { value, writable: true, configurable: true });
  }
  return true;
}

/** A decode waiting in a context's queue (the library's item; only its sequence is read here). */
export interface QueuedDecode {
  readonly sequenceId: number;
}

/** A context's queue of decodes, which its dispatch loop packs into batches front first. */
export interface DecodeQueue {
  /**
   * The queued decodes, in the order the next batch takes them (private `_queuedDecodes`). They may
   * be reordered, or taken out and put back later, with {@link ids} kept in step.
   */
  readonly items: QueuedDecode[];
  /** The sequence ids with a decode queued (private `_queuedDecodeSequenceIds`). */
  readonly ids: Set<number>;
  /** Asks the library to run its dispatch loop, after decodes were put back (private `_scheduleDecode`). */
  schedule(): void;
}

/** What {@link hookDecodeQueue} calls. */
export interface DecodeQueueHooks {
  /** Right before each batch's `llama_decode`. */
  decoding(): void;
  /** Synchronously after a sequence has queued a decode (its item is the last of the queue). */
  queued(queue: DecodeQueue): void;
  /**
   * After each queued decode's own after-batch action, once the batch that finished it was decoded;
   * the dispatch loop awaits it before it looks at the queue again.
   */
  afterBatch(queue: DecodeQueue): Promise<void>;
}

type DecodeOptions = { afterBatchAction?: (sequenceStateLength: number) => unknown } & Record<string, unknown>;
type DecodeInternals = {
  _decodeTokens?: (options: DecodeOptions, mapper: unknown) => Promise<unknown>;
  _queuedDecodes?: QueuedDecode[];
  _queuedDecodeSequenceIds?: Set<number>;
  _scheduleDecode?: () => void;
};

/**
 * Hooks into a context's decode queue: wraps the private `LlamaContext._decodeTokens` (through
 * which every sequence queues its tokens; the wrapper adds {@link DecodeQueueHooks.afterBatch} to
 * each item's `afterBatchAction` and calls {@link DecodeQueueHooks.queued}) and the native
 * `decodeBatch` ({@link wrapNativeBatch}), and returns the queue itself. Null, and no change, when
 * any of these internals is missing.
 *
 * Why: the library has no option to order the queue, to wait between batches, or to hand over its
 * context lock; batching.ts uses this for its three fixes (k−1 tokens per decode, sequence order,
 * drifting groups).
 */
export function hookDecodeQueue(context: LlamaContext, hooks: DecodeQueueHooks): DecodeQueue | null {
  const internal = context as unknown as DecodeInternals;
  const original = internal._decodeTokens;
  const items = internal._queuedDecodes;
  const ids = internal._queuedDecodeSequenceIds;
  const schedule = internal._scheduleDecode;
  if (typeof original !== 'function' || !Array.isArray(items) || !(ids instanceof Set) || typeof schedule !== 'function' || !nativeOf(context)) {
    return null;
  }
  const queue: DecodeQueue = { items, ids, schedule: () => schedule.call(context) };
  wrapNativeBatch(context, (native) => ({
    decodeBatch: () => {
      hooks.decoding();
      return native.decodeBatch();
    },
  }));
  internal._decodeTokens = function (options, mapper) {
    const inner = options.afterBatchAction;
    const queued = original.call(
      this,
      {
        ...options,
        async afterBatchAction(length: number) {
          const r = inner?.(length);
          if (r instanceof Promise) await r;
          await hooks.afterBatch(queue);
        },
      },
      mapper,
    );
    hooks.queued(queue);
    return queued;
  };
  return queue;
}

/**
 * The id of `seq` in its context (private `LlamaContextSequence._sequenceId`); undefined when the
 * library does not have it. Why: llama.cpp decodes only consecutive sequence ids as one
 * micro-batch, so slots.ts hands out sequences by id (see batching.ts), and the library does not
 * publish the id.
 */
export function sequenceId(seq: LlamaContextSequence): number | undefined {
  const id = (seq as unknown as { _sequenceId?: unknown })._sequenceId;
  return typeof id === 'number' ? id : undefined;
}

type CopyState = (other: LlamaContextSequence, upToTokenIndex: number) => Promise<boolean>;

/** The private `_copyStateFromOtherSequence` of `seq`, or undefined. */
function copyStateOf(seq: LlamaContextSequence): CopyState | undefined {
  const copy = (seq as unknown as { _copyStateFromOtherSequence?: unknown })._copyStateFromOtherSequence;
  return typeof copy === 'function' ? (copy as CopyState) : undefined;
}

/** Whether {@link copyPrefix} is available (the library has the private call it uses). */
export function canCopyPrefix(seq: LlamaContextSequence): boolean {
  return copyStateOf(seq) !== undefined;
}

/**
 * Makes `seq` hold the first `upTo` tokens of `from`'s cache: copies `from`'s whole KV cache into it
 * (`llama_memory_seq_cp`) and erases what follows `upTo`, through the private
 * `LlamaContextSequence._copyStateFromOtherSequence`. Resolves to whether `seq` then holds exactly
 * those tokens; false when the library lacks the call. Why: a prompt prefix that another sequence
 * holds (a shared system prompt) is copied instead of evaluated again (slots.ts); the library uses
 * this call internally (its decision context) and offers no public one.
 */
export function copyPrefix(seq: LlamaContextSequence, from: LlamaContextSequence, upTo: number): Promise<boolean> {
  const copy = copyStateOf(seq);
  return copy ? copy.call(seq, from, upTo) : Promise.resolve(false);
}
