/**
 * Plugin "backend-llama-server": llama.cpp's own `llama-server`, one process per loaded model
 * (with `--mmproj` for a model with a vision projector), reached over HTTP on a private Unix
 * socket with the OpenAI wire codec (the `openai-wire` plugin) backend-upstream uses too. The scheduler drives it like any
 * backend: keep-alive, the queue, slots and threads, metrics, keys and allow-lists apply
 * unchanged, and a server that dies is started again by the next request.
 *
 * Wherever its binary is built and passes the engine probe (probe.ts), GGUF text models and
 * rerankers run here (`prefers`), as do the models that need what only it serves (`vision`) and
 * those the `backends` configuration gives it; node-llama-cpp (backend-llama-cpp) serves
 * embedding models and every GGUF model on a machine without a usable binary. The GGUF format
 * (its handler, templates and memory estimate) is the `gguf` plugin's, which it requires; with
 * backend-llama-cpp disabled, every GGUF model runs here. The binary comes from `lia engine build` (cached outside the
 * project), the Debian package, or the `binary` option. See docs/backends.md.
 *
 * @module
 */
import { accessSync, constants } from 'node:fs';
import { definePlugin, Errors } from 'lia/plugin';
import { Type } from 'lia/utils';
import { gpuResolver } from './devices.js';
import { llamaServerBackend } from './backend.js';
import { cacheRoot, cachedBinary } from './build.js';
import { probeBinary } from './probe.js';
import { sweepStaleDirs } from './temp-dirs.js';
import { engineCommands } from './cli.js';

/** Flags LIA sets itself: a later copy would win, and some would expose or mislead the server. */
const RESERVED_ARGS = new Set(
  [
    '--host',
    '--port',
    '-m',
    '--model',
    '--api-key',
    '--api-key-file',
    '--mmproj',
    '--slot-save-path',
    '-np',
    '--parallel',
    '-t',
    '--threads',
    '-tb',
    '--threads-batch',
  ].concat([
    '-c',
    '--ctx-size',
    '-b',
    '--batch-size',
    '-ub',
    '--ubatch-size',
    '--embeddings',
    '--embedding',
    '--rerank',
    '--reranking',
    '--jinja',
    '--no-kv-unified',
    '--kv-unified',
    '-ngl',
    '--n-gpu-layers',
    '--gpu-layers',
    '-dev',
    '--device',
  ]),
);

export default definePlugin({
  name: 'backend-llama-server',
  apiVersion: 1,
  description: "GGUF models (vision and rerankers included) on llama.cpp's own llama-server, one process per model",
  options: Type.Object(
    {
      binary: Type.Optional(
        Type.String({
          minLength: 1,
          description:
            'The llama-server executable to run. Defaults to the one `lia engine build` built for the bundled llama.cpp release (in ~/.cache/lia, or LIA_CACHE_DIR).',
        }),
      ),
      cacheDir: Type.Optional(
        Type.String({
          minLength: 1,
          description: 'Where `lia engine build` caches its builds (the binary is looked up there). Defaults to $XDG_CACHE_HOME/lia, else ~/.cache/lia.',
        }),
      ),
      batchSize: Type.Integer({
        minimum: 16,
        maximum: 8192,
        default: 512,
        description: 'Prompt tokens evaluated per decode (`--batch-size`). Defaults to 512.',
      }),
      gpu: Type.Union([Type.Literal('auto'), Type.Literal('cpu'), Type.Literal('vulkan'), Type.Literal('cuda')], {
        default: 'auto',
        description:
          "Where models run: `auto` (CUDA, else Vulkan, when llama-server has the back end and it sees a device; else the CPU), `cpu`, `vulkan` or `cuda` (an error names what to install when it is missing). How many layers go to the GPU is the engine's offload plan (num_gpu). Defaults to auto.",
      }),
      startTimeoutMs: Type.Integer({ minimum: 1000, default: 300_000, description: 'Longest wait for a server to load its model, in ms. Defaults to 300000.' }),
      args: Type.Array(Type.String({ minLength: 1, maxLength: 256 }), {
        maxItems: 64,
        default: [],
        description:
          "More llama-server arguments for every server, appended after LIA's own (a later flag wins), e.g. `[--poll, '0']` or `[--flash-attn, on]`; the variable takes a JSON array. The address, key and files LIA gives each server cannot be changed here, and its slots, threads, context and batch are the engine's settings. Defaults to none.",
      }),
    },
    { additionalProperties: false },
  ),
  env: { LIA_LLAMA_SERVER: 'binary', LIA_CACHE_DIR: 'cacheDir', LIA_LLAMA_SERVER_ARGS: 'args', LIA_GPU: 'gpu' },
  dependencies: ['gguf', 'openai-wire'],
  requires: ['gguf', 'openai-wire'],
  commands: engineCommands,
  async setup(app, ctx) {
    const fixed = ctx.options.args.find((a) => RESERVED_ARGS.has(a.split('=')[0]!));
    if (fixed)
      throw new Error(
        `plugins.${ctx.name}.options.args: ${fixed} is set by LIA for every server (its address, key, model files, slots, threads, context, batch, device and GPU layers)`,
      );
    const configured = ctx.options.binary;
    const env = { ...process.env, ...(ctx.options.cacheDir ? { LIA_CACHE_DIR: ctx.options.cacheDir } : {}) };
    let found: string | null = null;
    let warned = false;
    const located = async (): Promise<string> => {
      if (configured) {
        try {
          accessSync(configured, constants.X_OK);
        } catch {
          throw Errors.unavailable(`plugins.${ctx.name}.options.binary: ${configured} is not an executable file`);
        }
        return configured;
      }
      found ??= await cachedBinary(env);
      if (!found) throw Errors.unavailable('llama-server is not built: run `lia engine build` (or set plugins.backend-llama-server.options.binary)');
      return found;
    };
    // A binary that cannot compute on this CPU (the probe, probe.ts) is not used: GGUF models go
    // to node-llama-cpp, and the log says why once.
    const binary = async (): Promise<string> => {
      const path = await located();
      const probe = await probeBinary(path, cacheRoot(env));
      if (probe.ok) return path;
      if (!warned)
        ctx.log.warn({ engine: 'llama-server', signal: probe.signal, variant: probe.variant }, `${probe.message}; GGUF models run on node-llama-cpp`);
      warned = true;
      throw Errors.unavailable(`llama-server cannot compute on this machine's CPU (${probe.signal ?? 'the probe failed'}); see the log`);
    };
    // Asked before a reranker is given to this backend by preference: one that is not built leaves
    // it on node-llama-cpp (a fresh install), so only the check, never the error, is wanted here.
    const available = () =>
      binary().then(
        () => true,
        () => false,
      );
    const gguf = ctx.hooks.extensions.get('gguf');
    const backend = llamaServerBackend({
      binary,
      available,
      batchSize: ctx.options.batchSize,
      startTimeoutMs: ctx.options.startTimeoutMs,
      args: ctx.options.args,
      // The budget of a model comes from the GGUF format's handler (the gguf plugin's), and so
      // does whether the weights carry a chat template, or the store's template layer prompts them.
      footprint: (model, options) => gguf.format.footprint?.(model, options),
      chatTemplate: (model) => gguf.format.chatTemplate?.(model),
      gpu: gpuResolver(ctx.options.gpu, (chosen, devices) =>
        ctx.log.info(
          chosen
            ? { engine: 'llama-server', backend: chosen.kind, from: chosen.source, devices: devices.map((d) => `${d.id}: ${d.name}`) }
            : { engine: 'llama-server', backend: 'cpu' },
          chosen
            ? `llama-server runs models on ${chosen.kind} (${devices.length} device${devices.length === 1 ? '' : 's'})`
            : 'llama-server runs models on the CPU: no GPU back end sees a device',
        ),
      ),
    });
    ctx.hooks.backends.register(backend);
    // The temporary folders an appliance that died left behind.
    void sweepStaleDirs().then((n) => n > 0 && ctx.log.info({ removed: n }, 'removed the temporary folders of servers of an appliance that ended'));
    // Servers are the scheduler's models: it unloads them (stopping each process) at shutdown.
    void app;
  },
});
