/**
 * One `llama-server` process serving one loaded model on a Unix socket in a folder only the
 * appliance's user may enter (0700; a loopback port where the socket's path would be too long). It
 * is started with the scheduler's load options (threads, batch threads, slots, context per slot,
 * batch size), the model's projector (`--mmproj`) and a random key (sent in the environment, never
 * on the command line): no other local account can reach the server, so none can hold its HTTP
 * threads, and no other process of the same user can use it without the key. {@link LlamaServer.start} resolves once `/health`
 * answers 200 and `/props` tells the context per slot; an exit before that rejects with the end of
 * its log, an exit after it is reported to `onExit` (the scheduler forgets the model and the next
 * request starts a fresh server).
 *
 * @module
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { unlink } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { Pool, request, type Dispatcher } from 'undici';
import { Errors } from 'lia/plugin';
import { promptTooLong } from 'lia/gguf';
import { privateDir } from './temp-dirs.js';
import { warmConnector, type WarmConnector } from './warm-connector.js';
import type { Speculation } from 'lia/engine';

/** What a server is started with. */
export interface ServerSpec {
  binary: string;
  model: string;
  /** The vision projector (`--mmproj`), when the model has one. */
  projector?: string;
  threads: number;
  batchThreads: number;
  /** Slots (`-np`): requests served at once. */
  parallel: number;
  /** Tokens of context per slot; 0 asks for the model's own. */
  contextPerSlot: number;
  batchSize: number;
  /** Start as an embedding server (`--embeddings`): a model with a pooling type. */
  embedding: boolean;
  /**
   * How an embedding server pools a sequence (`--pooling`): `last`, the last token's state, for a
   * generation model (what node-llama-cpp gives for a model without a pooling type). Unset: the
   * model's own.
   */
  pooling?: 'last';
  /** Start as a ranking server (`--rerank`: embeddings pooled by the RANK head, `/v1/rerank`): a reranker. Defaults to false. */
  rerank?: boolean;
  /**
   * A private folder for slot snapshots (`--slot-save-path`): the server copies one slot's state
   * into another through it (slots.ts). Unset: no snapshots.
   */
  slotDir?: string;
  /**
   * The chat template to prompt with instead of the GGUF's (`--chat-template`, Jinja text): for a
   * GGUF without one whose store template names a known chat format. Unset: the GGUF's, else
   * llama.cpp's ChatML.
   */
  chatTemplate?: string;
  /**
   * Where the layers go (`--device`, `--n-gpu-layers`): a device of the GPU back end `env` loads
   * and how many layers, or null for the CPU only (`--device none`). Unset: the CPU.
   */
  offload?: { device: string | null; gpuLayers: number; split?: readonly { device: string; gpuLayers: number }[] };
  /** The KV cache's element type, keys and values (`-ctk`, `-ctv`). Unset: llama.cpp's f16. */
  kvCacheType?: 'f16' | 'q8_0' | 'q4_0';
  /** Flash attention (`-fa on|off`). Unset: `auto`. */
  flashAttention?: boolean;
  /** LoRA adapters loaded with the model, at the scale a request that names none gets (`--lora-scaled`); requests set their own (`lora`). */
  adapters?: readonly { path: string; scale: number }[];
  /** Environment the server needs for its GPU back end (`GGML_BACKEND_PATH`; devices.ts). */
  env?: Readonly<Record<string, string>>;
  /** Speculative decoding: a draft model or n-gram lookup (`--spec-type`). Absent: none. */
  speculation?: Speculation;
  /** More arguments, appended after LIA's own (the plugin's `args` option). */
  args?: readonly string[];
  /** Sees everything the server writes, as it comes (the engine probe reads which CPU variant it loaded). */
  onOutput?: (text: string) => void;
  /** Longest wait for the model to load, in ms. */
  startTimeoutMs: number;
}

/** What `/props` says about the running server. */
interface Props {
  default_generation_settings?: { n_ctx?: number };
  total_slots?: number;
  modalities?: { vision?: boolean; audio?: boolean };
}

/**
 * The server is started through util-linux's `setpriv --pdeathsig KILL` where it is installed
 * (Debian's essential util-linux): the kernel kills it when the appliance's process ends, however
 * it ends (a SIGKILL, an out-of-memory kill), so no server lives on with parent 1 holding its
 * model's memory. setpriv then execs the server in place: the child's pid is the server's.
 */
const DEATH_SIGNAL: readonly string[] = process.platform === 'linux' && existsSync('/usr/bin/setpriv') ? ['/usr/bin/setpriv', '--pdeathsig', 'KILL', '--'] : [];

/** Where a server listens: a Unix socket's path, or a loopback port. */
type Address = { socket: string } | { port: number };

/** The longest socket path the kernel takes is 107 bytes; a longer one falls back to a loopback port. */
const MAX_SOCKET_PATH = 100;

let socketDir: Promise<string | null> | null = null;

/** A fresh address: a socket in this process's private folder, else a free loopback port. */
async function freeAddress(): Promise<Address> {
  socketDir ??= privateDir('sockets').catch(() => null);
  const dir = await socketDir;
  const socket = dir ? path.join(dir, `${randomBytes(6).toString('hex')}.sock`) : '';
  return dir && Buffer.byteLength(socket) <= MAX_SOCKET_PATH ? { socket } : { port: await freePort() };
}

/** A free loopback TCP port (the kernel's pick, released for llama-server to bind). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

/**
 * Strings sent to a server with each lone UTF-16 surrogate replaced by U+FFFD: JSON.stringify
 * writes a lone one as an escape (`"\ud800"`) that llama.cpp's JSON parser refuses.
 */
function wellFormed(_key: string, value: unknown): unknown {
  if (typeof value !== 'string' || !/[\uD800-\uDFFF]/.test(value)) return value;
  return value.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD');
}

/** The exceptions a server's request handler reports for input it cannot take (answered with HTTP 500). */
const INPUT_FAULT = /unordered_map::at|out_of_range|invalid (?:utf-?8|string)|jinja|chat template/i;

function inputFault(message: string): string {
  return /unordered_map::at|out_of_range/.test(message) ? "a character of the input is not in the model's vocabulary" : message.slice(0, 200);
}

/**
 * The line of a server's log that says why a load failed (llama.cpp's last line naming an error),
 * its file paths replaced by their last component and cut to 200 characters; empty when none.
 */
export function loadErrorLine(log: string): string {
  const line = log
    .split('\n')
    .reverse()
    .find((l) => /error|failed|unknown|unsupported|invalid/i.test(l));
  if (!line) return '';
  return line
    .replace(/(?:\/[^\s/'"]+)+\/([^\s/'"]+)/g, '$1')
    .replace(/\s+/g, ' ')
    .trim()
    .slice(0, 200);
}

/**
 * The offload plan as llama-server's arguments: its device and layer count, and for a model spread
 * over several GPUs each device with its share of the layers (`--tensor-split`, llama.cpp's
 * default layer split: the proportions are layer counts).
 */
function offloadArgs(offload: NonNullable<ServerSpec['offload']>): string[] {
  const split = offload.split ?? [];
  const devices = split.length > 1 ? split.map((s) => s.device).join(',') : offload.device!;
  return [
    '--device',
    devices,
    '--n-gpu-layers',
    String(offload.gpuLayers),
    ...(split.length > 1 ? ['--tensor-split', split.map((s) => s.gpuLayers).join(',')] : []),
  ];
}

/**
 * Speculative decoding as llama-server's arguments (the flags of the bundled release's `--help`):
 * a draft model (`--spec-type draft-simple`, `--spec-draft-model`, up to `--spec-draft-n-max`
 * tokens per step, none required: `--spec-draft-n-min 0`), kept on the CPU with a model on the
 * CPU and otherwise placed as llama-server places it (it follows `--device`); or n-gram lookup
 * (`--spec-type ngram-simple`: an n-gram of `--spec-ngram-simple-size-n` tokens looked up, the
 * `--spec-ngram-simple-size-m` tokens after it drafted).
 */
export function speculationArgs(s: Speculation, offload: ServerSpec['offload']): string[] {
  if (s.kind === 'ngram') {
    return ['--spec-type', 'ngram-simple', '--spec-ngram-simple-size-n', String(s.ngram), '--spec-ngram-simple-size-m', String(s.maxDraft)];
  }
  return [
    '--spec-type',
    'draft-simple',
    '--spec-draft-model',
    s.draft.path,
    '--spec-draft-n-max',
    String(s.maxDraft),
    '--spec-draft-n-min',
    '0',
    ...(offload ? [] : ['--spec-draft-ngl', '0']),
  ];
}

/** The command-line arguments of a server for `spec` at `address`. */
export function serverArgs(spec: ServerSpec, address: Address): string[] {
  return [
    '--model',
    spec.model,
    ...(spec.projector ? ['--mmproj', spec.projector] : []),
    // llama.cpp listens on a Unix socket for a host that ends in `.sock`.
    ...('socket' in address ? ['--host', address.socket] : ['--host', '127.0.0.1', '--port', String(address.port)]),
    '--threads',
    String(spec.threads),
    '--threads-batch',
    String(spec.batchThreads),
    '--parallel',
    String(spec.parallel),
    // Split evenly among the slots (no unified cache), so every slot has the context asked for.
    '--no-kv-unified',
    '--ctx-size',
    String(spec.contextPerSlot * spec.parallel),
    '--batch-size',
    String(spec.batchSize),
    '--ubatch-size',
    String(spec.batchSize),
    // The memory the scheduler budgets is the model's: no host-side prompt cache on top.
    '--cache-ram',
    '0',
    '--no-webui',
    // The GGUF's Jinja template; a thinking model's `<think>` section left in the text, which the
    // engine splits as it does node-llama-cpp's.
    ...(spec.rerank ? ['--rerank'] : spec.embedding ? ['--embeddings'] : ['--jinja', '--reasoning-format', 'none']),
    ...(spec.pooling ? ['--pooling', spec.pooling] : []),
    ...(spec.chatTemplate !== undefined && !spec.rerank && !spec.embedding ? ['--chat-template', spec.chatTemplate] : []),
    ...(spec.slotDir ? ['--slot-save-path', spec.slotDir] : []),
    ...(spec.offload?.device ? offloadArgs(spec.offload) : ['--device', 'none', '--n-gpu-layers', '0']),
    ...(spec.kvCacheType && spec.kvCacheType !== 'f16' ? ['--cache-type-k', spec.kvCacheType, '--cache-type-v', spec.kvCacheType] : []),
    '--flash-attn',
    spec.flashAttention === undefined ? 'auto' : spec.flashAttention ? 'on' : 'off',
    ...(spec.adapters?.length ? ['--lora-scaled', spec.adapters.map((a) => `${a.path}:${a.scale}`).join(',')] : []),
    ...(spec.speculation ? speculationArgs(spec.speculation, spec.offload?.device ? spec.offload : undefined) : []),
    ...(spec.args ?? []),
  ];
}

export class LlamaServer {
  readonly #child: ChildProcess;
  readonly #base: string;
  readonly #key: string;
  /** One origin, so a pool of its own: an agent drops an origin's pool whenever its last connection closes, as llama-server's do after each stream, and builds it again for the next request. */
  readonly #pool: Pool;
  readonly #connector: WarmConnector;
  #stopping = false;
  #log = '';
  /** Context per slot, as the server reports it. */
  contextPerSlot = 0;
  /** Whether the server takes images (its projector loaded with a vision encoder). */
  vision = false;
  /** Whether the server takes audio (its projector loaded with an audio encoder). */
  audio = false;
  /** Slots, as the server reports them. */
  slots = 1;
  /** The model's trained context, as the server reports it (0 when it does not). */
  trainedContext = 0;
  /** The model's vocabulary size, as the server reports it (0 when it does not). */
  vocabulary = 0;

  /** Resolves with how the process ended: its signal, or `exit code N`. */
  readonly #ended: Promise<string>;

  readonly #socket: string | null;

  private constructor(child: ChildProcess, address: Address, key: string) {
    this.#child = child;
    this.#ended = new Promise((resolve) => child.once('exit', (code, signal) => resolve(signal ?? `exit code ${code}`)));
    this.#socket = 'socket' in address ? address.socket : null;
    this.#base = 'socket' in address ? 'http://localhost' : `http://127.0.0.1:${address.port}`;
    this.#key = key;
    this.#connector = warmConnector({ timeout: 10_000, ...(this.#socket ? { socketPath: this.#socket } : {}) });
    this.#pool = new Pool(this.#base, {
      connect: this.#connector,
      headersTimeout: 0,
      bodyTimeout: 0,
      keepAliveTimeout: 30_000,
    });
    child.stderr?.on('data', (d: Buffer) => (this.#log = (this.#log + d.toString()).slice(-4000)));
    child.stdout?.on('data', (d: Buffer) => (this.#log = (this.#log + d.toString()).slice(-4000)));
  }

  /** The process id (for tests and logs). */
  get pid(): number | undefined {
    return this.#child.pid;
  }

  /** The last lines llama-server wrote. */
  get logTail(): string {
    return this.#log.trim().split('\n').slice(-8).join('\n');
  }

  /**
   * Starts a server and waits until it serves. `onExit` is called once if the process ends on its
   * own afterwards (a crash, a kill): not after {@link stop}.
   */
  static async start(spec: ServerSpec, onExit: (err: Error) => void, env: NodeJS.ProcessEnv = process.env): Promise<LlamaServer> {
    const key = randomBytes(24).toString('base64url');
    for (let attempt = 0; ; attempt++) {
      const address = await freeAddress();
      const [file, ...argv] = [...DEATH_SIGNAL, spec.binary, ...serverArgs(spec, address)] as [string, ...string[]];
      const child = spawn(file, argv, {
        // ggml looks for its CPU variants beside the binary and in the working folder: only the former.
        cwd: path.dirname(spec.binary),
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...env, ...spec.env, LLAMA_API_KEY: key, LLAMA_ARG_HOST: 'socket' in address ? address.socket : '127.0.0.1' },
      });
      const server = new LlamaServer(child, address, key);
      if (spec.onOutput) for (const out of [child.stdout, child.stderr]) out?.on('data', (d: Buffer) => spec.onOutput!(d.toString()));
      try {
        await server.#ready(spec.startTimeoutMs);
      } catch (err) {
        const lost = /couldn't bind|address already in use/i.test(server.#log);
        await server.stop();
        if (lost && attempt < 3) continue; // another process took the port in between (or the socket's name)
        throw err;
      }
      child.once('exit', (code, signal) => {
        if (server.#stopping) return;
        void server.#pool.close();
        onExit(new Error(`llama-server exited (${signal ?? `code ${code}`}): ${server.logTail}`));
      });
      return server;
    }
  }

  async #ready(timeoutMs: number): Promise<void> {
    const exited = new Promise<never>((_, reject) => {
      this.#child.once('error', (err) => reject(Errors.engineFailed(`llama-server could not start: ${err.message}`)));
      this.#child.once('exit', (code, signal) => reject(this.#loadFailure(code, signal)));
    });
    exited.catch(() => undefined);
    const started = Date.now();
    const deadline = started + timeoutMs;
    for (;;) {
      if (Date.now() > deadline) throw Errors.engineFailed(`llama-server did not load the model within ${timeoutMs} ms`, { cause: new Error(this.logTail) });
      const ok = await Promise.race([
        exited,
        this.fetchJson('GET', '/health', undefined, AbortSignal.timeout(5000)).then(
          () => true,
          () => false,
        ),
      ]);
      if (ok) break;
      // Every 25 ms while a small model may be about to answer, then every 200 ms: a load's first
      // token waits for this poll, and a large model's load for a few more idle requests.
      const pause = Date.now() - started < 5000 ? 25 : 200;
      await Promise.race([exited, new Promise((r) => setTimeout(r, pause))]);
    }
    const props = (await Promise.race([exited, this.fetchJson('GET', '/props', undefined, AbortSignal.timeout(10_000))])) as Props;
    this.contextPerSlot = props.default_generation_settings?.n_ctx ?? 0;
    this.vision = props.modalities?.vision === true;
    this.audio = props.modalities?.audio === true;
    this.slots = props.total_slots ?? 1;
    const models = (await this.fetchJson('GET', '/v1/models', undefined, AbortSignal.timeout(10_000)).catch(() => null)) as {
      data?: Array<{ meta?: { n_ctx_train?: number; n_vocab?: number } }>;
    } | null;
    this.trainedContext = models?.data?.[0]?.meta?.n_ctx_train ?? 0;
    this.vocabulary = models?.data?.[0]?.meta?.n_vocab ?? 0;
  }

  /**
   * The error of a server that ended before it served: a death by signal is an engine crash (the
   * scheduler retries it, then falls back to another engine); an exit names the reason the log
   * gives, in one line without the file paths it holds. The log's end goes to the cause, for the
   * appliance's log only.
   */
  #loadFailure(code: number | null, signal: NodeJS.Signals | null): Error {
    const cause = new Error(this.logTail);
    if (signal) return Errors.engineCrashed(`llama-server died of ${signal} while loading the model`, { cause, crash: { engine: 'llama-server', signal } });
    const reason = loadErrorLine(this.#log);
    return Errors.engineFailed(`llama-server could not load the model (exit code ${code})${reason ? `: ${reason}` : ''}`, { cause });
  }

  /**
   * The error of a request the server did not answer: a connection refused or reset by a server
   * that is dying is, once it has ended, an engine crash, which the engine retries on a fresh
   * server (the engine's plan/context-fit.ts); else an engine failure.
   */
  async #unanswered(err: unknown): Promise<Error> {
    const ended = await Promise.race([this.#ended, new Promise<null>((r) => setTimeout(r, 1000, null))]);
    if (ended !== null && !this.#stopping) {
      return Errors.engineCrashed(`llama-server ended (${ended}) before it answered`, { cause: err, crash: { engine: 'llama-server', signal: ended } });
    }
    return Errors.engineFailed(`llama-server did not answer (${(err as Error).message})`);
  }

  /**
   * Sends one request and resolves with the answer once its status is 2xx. A 4xx is the request's
   * fault: a 400 with llama-server's own message (this process is the appliance's own, so its
   * words may reach the client: "failed to load image", the context that was exceeded); a
   * connection failure or a 5xx is the engine's (500).
   */
  async send(method: 'GET' | 'POST', path: string, body: unknown, signal: AbortSignal): Promise<Dispatcher.ResponseData> {
    let res: Dispatcher.ResponseData | undefined;
    const payload = body !== undefined ? JSON.stringify(body, wellFormed) : undefined;
    for (let attempt = 0; !res; attempt++) {
      try {
        res = await request(this.#base + path, {
          method,
          headers: { authorization: `Bearer ${this.#key}`, ...(payload !== undefined ? { 'content-type': 'application/json' } : {}) },
          ...(payload !== undefined ? { body: payload } : {}),
          signal,
          dispatcher: this.#pool,
        });
      } catch (err) {
        if (signal.aborted) throw signal.reason;
        // llama-server closes its connection after a streamed answer, and a request written on it
        // just before the close never reaches a handler: it is sent once more, on a new connection,
        // while the process runs (a dying server then refuses it, which is told apart below).
        if (attempt === 0 && closedUnder(err) && this.#child.exitCode === null && this.#child.signalCode === null && !this.#stopping) continue;
        throw await this.#unanswered(err);
      }
    }
    if (res.statusCode >= 200 && res.statusCode < 300) return res;
    const text = await res.body.text().catch(() => '');
    let message = '';
    let type = '';
    let e: { message?: string; type?: string; n_prompt_tokens?: number; n_ctx?: number } | undefined;
    try {
      e = (JSON.parse(text) as { error?: typeof e }).error;
      message = e?.message ?? '';
      type = e?.type ?? '';
    } catch {
      message = text.slice(0, 300);
    }
    if (res.statusCode === 400 && type === 'exceed_context_size_error') {
      // In the words node-llama-cpp's runner uses, so a client reads the same 400 on either engine.
      const known = typeof e?.n_prompt_tokens === 'number' && typeof e.n_ctx === 'number';
      throw Errors.contextLengthExceeded(known ? promptTooLong(e!.n_prompt_tokens!, e!.n_ctx!, this.trainedContext) : message);
    }
    // llama.cpp's media loader fails with a server error for an image or a clip it cannot decode;
    // the media is the request's, so it is the request's fault.
    if (/failed to load image or audio/i.test(message))
      throw Errors.badRequest(`an image or audio clip could not be decoded (${message})`, { param: 'messages' });
    if (/failed to load image/i.test(message)) throw Errors.badRequest(`an image could not be decoded (${message})`, { param: 'images' });
    // The server survived an exception of its request handler (a 400 or a 500): its tokenizer looking up a
    // character the vocabulary lacks (a GGUF without byte tokens), a template refusing the
    // messages. The input is the client's, so is the fault.
    if (INPUT_FAULT.test(message)) throw Errors.badRequest(`the model cannot take this input (${inputFault(message)})`);
    if (res.statusCode >= 400 && res.statusCode < 500 && res.statusCode !== 401 && res.statusCode !== 404) {
      throw Errors.badRequest(message ? `the engine refused the request: ${message}` : `the engine refused the request (HTTP ${res.statusCode})`);
    }
    if (res.statusCode === 503) throw Errors.unavailable('llama-server is busy or still loading', { headers: { 'Retry-After': '1' } });
    throw Errors.engineFailed(`llama-server answered HTTP ${res.statusCode}${message ? `: ${message}` : ''}`);
  }

  /** Saves slot `slot`'s state (its tokens and their cache) as `file`, a bare name in the server's `slotDir`; the server waits for the slot to be idle. */
  async saveSlot(slot: number, file: string, signal: AbortSignal): Promise<void> {
    await this.fetchJson('POST', `/slots/${slot}?action=save`, { filename: file }, signal);
  }

  /** Loads a state that {@link saveSlot} saved into slot `slot`. */
  async restoreSlot(slot: number, file: string, signal: AbortSignal): Promise<void> {
    await this.fetchJson('POST', `/slots/${slot}?action=restore`, { filename: file }, signal);
  }

  /** {@link send}, and the answer's JSON. */
  async fetchJson(method: 'GET' | 'POST', path: string, body: unknown, signal: AbortSignal): Promise<unknown> {
    const res = await this.send(method, path, body, signal);
    try {
      return await res.body.json();
    } catch (err) {
      if (signal.aborted) throw signal.reason;
      throw Errors.engineFailed(`llama-server sent an answer that is not JSON (${(err as Error).message})`);
    }
  }

  /** Ends the process (SIGTERM, then SIGKILL after 5 s); safe to call twice. */
  async stop(): Promise<void> {
    this.#stopping = true;
    const child = this.#child;
    if (child.exitCode === null && child.signalCode === null) {
      const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await gone;
      clearTimeout(timer);
    }
    this.#connector.close();
    await this.#pool.close().catch(() => undefined);
    if (this.#socket) await unlink(this.#socket).catch(() => undefined);
  }
}

/** Whether a request failed because its connection was closed or reset under it (undici's socket error, a reset). */
function closedUnder(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'UND_ERR_SOCKET' || code === 'ECONNRESET';
}
