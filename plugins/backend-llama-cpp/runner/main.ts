/**
 * The runner: a child process that owns one loaded GGUF model, so a llama.cpp abort or a segfault
 * kills only this process, never the appliance. The parent (`../runner-client.ts`) forks it (with
 * tsx's loader when running from the TypeScript sources) and speaks the protocol of `../protocol.ts`
 * over IPC: `prepare` loads the bindings early, `load` the model, then requests by id. The runner
 * exits when the parent goes away or asks it to unload.
 *
 * @module
 */
import type { ParentMessage, RunnerMessage } from '../protocol.js';
import { ContextLengthError, RequestError } from './errors.js';
import { gpuDevices, ModelSession, prepareLlama, type Prepared } from './session.js';

let session: ModelSession | null = null;
let prepared: Prepared | undefined;
const inflight = new Map<number, AbortController>();

/**
 * Messages leave at the end of the current event-loop turn, together. A token's message is sent
 * only after node-llama-cpp has queued the next decode (which happens in the same turn, in the
 * microtasks after the token): the IPC write wakes the parent, which on a small machine takes
 * about 0.3 ms of this thread, and sent at once it sat between two decodes of every stream
 * (measured: 5 % of single-stream decode speed). With several generations in flight, one decode
 * step yields a token for every stream, and one write per step costs less than one per token.
 * A generation's first token is the exception ({@link sendNow}): it is the time to first token,
 * and waiting for the rest of its turn cost 0.13 ms of it.
 */
let outbox: RunnerMessage[] = [];
const flush = (): void => {
  const messages = outbox;
  outbox = [];
  if (process.connected && messages.length > 0) process.send?.(messages.length === 1 ? messages[0] : { t: 'batch', messages });
};
const send = (message: RunnerMessage): void => {
  if (outbox.push(message) === 1) setImmediate(flush);
};
/** Sends `message` at once, after anything already waiting (the order of messages is kept). */
const sendNow = (message: RunnerMessage): void => {
  outbox.push(message);
  flush();
};

function fail(id: number, err: unknown): void {
  const kind = err instanceof ContextLengthError ? 'context_length' : err instanceof RequestError ? 'bad_request' : 'engine';
  send({ t: 'error', id, kind, message: err instanceof Error ? err.message : String(err) });
}

async function run(id: number, work: (signal: AbortSignal) => Promise<void>): Promise<void> {
  const ctl = new AbortController();
  inflight.set(id, ctl);
  try {
    await work(ctl.signal);
  } catch (err) {
    if (!ctl.signal.aborted) fail(id, err);
  } finally {
    inflight.delete(id);
  }
}

async function shutdown(code: number): Promise<never> {
  for (const ctl of inflight.values()) ctl.abort(new Error('unloading'));
  flush();
  try {
    await session?.dispose();
  } catch {
    // exiting anyway
  }
  process.exit(code);
}

function handle(message: ParentMessage): void {
  switch (message.t) {
    case 'prepare':
      prepared = prepareLlama(message.gpu);
      // A failure here surfaces (and is reported) when the model is loaded.
      prepared.llama.catch(() => undefined);
      return;
    case 'devices':
      // Asked of a prepared runner before a load: its bindings are the ones the load will use.
      (prepared ?? (prepared = prepareLlama('auto'))).llama.then(gpuDevices).then(
        (devices) => sendNow({ t: 'devices', devices }),
        () => sendNow({ t: 'devices', devices: [] }),
      );
      return;
    case 'load':
      ModelSession.load(message.spec, prepared).then(
        (s) => {
          session = s;
          for (const message of s.warnings) send({ t: 'log', level: 'warn', message });
          send({ t: 'ready', info: s.info });
        },
        (err: unknown) => {
          send({ t: 'load_error', message: err instanceof Error ? err.message : String(err) });
          setImmediate(() => process.exit(1));
        },
      );
      return;
    case 'generate':
    case 'chat': {
      const s = session;
      if (!s) return fail(message.id, new Error('the model is not loaded'));
      let first = true;
      const emit = (event: Parameters<Parameters<ModelSession['generate']>[2]>[0]): void => {
        if (first && event.type === 'token') {
          first = false;
          return sendNow({ t: 'event', id: message.id, event });
        }
        send({ t: 'event', id: message.id, event });
      };
      void run(message.id, (signal) => (message.t === 'generate' ? s.generate(message.params, signal, emit) : s.chat(message.params, signal, emit)));
      return;
    }
    case 'embed': {
      const s = session;
      if (!s) return fail(message.id, new Error('the model is not loaded'));
      void run(message.id, async (signal) => send({ t: 'result', id: message.id, result: await s.embed(message.params, signal) }));
      return;
    }
    case 'count': {
      const s = session;
      if (!s) return fail(message.id, new Error('the model is not loaded'));
      void run(message.id, async () => send({ t: 'result', id: message.id, result: s.countChatTokens(message.params) }));
      return;
    }
    case 'rank':
    case 'tokenize':
    case 'detokenize': {
      const s = session;
      if (!s) return fail(message.id, new Error('the model is not loaded'));
      void run(message.id, async (signal) => send({ t: 'result', id: message.id, result: await s.answer(message, signal) }));
      return;
    }
    case 'abort':
      inflight.get(message.id)?.abort(new Error('aborted'));
      return;
    case 'threads':
      session?.setBatchThreads(message.batch);
      return;
    case 'unload':
      void shutdown(0);
      return;
  }
}

process.on('message', (m) => handle(m as ParentMessage));
// The parent is gone (crashed or exited): nobody can use this model any more.
process.on('disconnect', () => void shutdown(0));
// node-llama-cpp can reject inside its dispatch loop (a sequence disposed during a prefill raises
// there, and nothing awaits that promise); log instead of dying.
process.on('unhandledRejection', (reason) => {
  send({ t: 'log', level: 'warn', message: `unhandled rejection in runner: ${reason instanceof Error ? reason.message : String(reason)}` });
});
