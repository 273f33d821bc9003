/**
 * The typed hook interfaces through which plugins contribute to the appliance and reach each
 * other. Core creates one {@link Hooks} object per app; every plugin's `setup` receives it.
 *
 * - registries (`auth`, `backends`, `gpu`, `requestObservers`, `inferenceObservers`): many plugins
 *   may add to them;
 * - sole hooks (`tls`, `models`, `inference`, `keys`, `serviceManager`, `network`, `gpuMonitor`):
 *   exactly one plugin provides each (the plugin that declares it in `provides`); reading one that
 *   nobody provides throws a 503 that names the hook;
 * - `extensions`: hooks that plugins define for each other (see {@link Extensions}).
 *
 * "Slot" in LIA means an engine's request slot (a sequence and its KV cache); the hook exactly one
 * plugin fills was called `Slot` before and is {@link SoleHook} now (`Slot` stays, deprecated, until
 * the plugin API's next major).
 *
 * @module
 */
import type { AuthStrategy, KeyStore } from '../contracts/auth.js';
import type { GpuProvider, ServiceManager } from '../contracts/host.js';
import type { InferenceService } from '../contracts/inference.js';
import type { ModelSource, ModelStore } from '../contracts/model-store.js';
import type { NetworkProvider } from '../contracts/network.js';
import type { GpuMonitor, InferenceObserver, RequestObserver } from '../contracts/observe.js';
import type { TlsProvider } from '../contracts/tls.js';
import { Errors, type AppError } from '../errors.js';
import type { LogHub } from '../logging.js';
import { ServiceRegistry } from '../services/registry.js';
import { BackendRegistry } from './backend-registry.js';

export { BackendRegistry };

/** A hook exactly one plugin fills: a second provider is an error, reading it unfilled a 503. */
export class SoleHook<T> {
  #value: T | undefined;
  #provider: string | undefined;
  readonly #what: string;
  readonly #hint: string;

  constructor(what: string, hint: string) {
    this.#what = what;
    this.#hint = hint;
  }

  /** Fills the hook; a second provider is a configuration error. */
  provide(value: T, provider: string): void {
    if (this.#value !== undefined) {
      throw new Error(`${this.#what} is provided by both "${this.#provider}" and "${provider}"; enable only one`);
    }
    this.#value = value;
    this.#provider = provider;
  }

  get provided(): boolean {
    return this.#value !== undefined;
  }

  /** The value; throws a 503 AppError naming the plugin to enable when it is missing. */
  get(): T {
    if (this.#value === undefined) throw Errors.unavailable(`${this.#what} is not available: ${this.#hint}`);
    return this.#value;
  }

  /** The value or undefined, for optional collaborations. */
  maybe(): T | undefined {
    return this.#value;
  }
}

/**
 * The former name of {@link SoleHook}.
 *
 * @deprecated since LIA 0.1.0 (plugin API 1): use {@link SoleHook}. Removed at plugin API 2.
 */
export const Slot = SoleHook;
/**
 * The former name of {@link SoleHook}.
 *
 * @deprecated since LIA 0.1.0 (plugin API 1): use {@link SoleHook}. Removed at plugin API 2.
 */
export type Slot<T> = SoleHook<T>;

/** A list many plugins add to. */
export class Registry<T extends { readonly name: string }> {
  readonly #items: T[] = [];
  readonly #what: string;

  constructor(what: string) {
    this.#what = what;
  }

  register(item: T): void {
    if (this.#items.some((i) => i.name === item.name)) throw new Error(`${this.#what} "${item.name}" is registered twice`);
    this.#items.push(item);
  }

  /**
   * The registered items. Always the same array, which later registrations extend: a caller may
   * keep it (e.g. read it on every request) and still see what plugins set up after it register.
   */
  list(): readonly T[] {
    return this.#items;
  }
}

/** Lines a plugin adds to the boot banner (the device's console). */
export interface BannerSection {
  readonly name: string;
  /** Sections print in ascending order after the host name and URLs. Defaults to 100. */
  readonly order?: number;
  /** `[label, value]` pairs; an empty label continues the line above. */
  lines(info: { port: number; hostname: string }): ReadonlyArray<readonly [label: string, value: string]>;
}

/**
 * The error body of one API surface. Core renders every error through the format whose `prefix`
 * is the longest match of the request's normalised path; other paths get `{"error":"message"}`.
 */
export interface ErrorFormat {
  readonly name: string;
  /** Lower-case path prefix, e.g. `/v1`. */
  readonly prefix: string;
  /** The JSON body for an error (also the last frame of a failed stream on this surface). */
  body(error: AppError): unknown;
}

/**
 * Hooks that plugins define for other plugins. A plugin that offers one declares its type by
 * augmenting this interface and provides it with {@link Extensions.provide}; plugins that use it
 * list the provider in `dependencies` and read it with {@link Extensions.get}:
 *
 * ```ts
 * declare module 'lia/plugin' {
 *   interface CustomHooks { 'echo-voices': Registry<{ name: string }> }
 * }
 * ctx.hooks.extensions.provide('echo-voices', new Registry('voice'), ctx.name)
 * ```
 */
export interface CustomHooks {}

/** The named hooks plugins offer each other; each name is provided once. */
export class Extensions {
  readonly #hooks = new Map<string, SoleHook<unknown>>();

  #hook(name: string): SoleHook<unknown> {
    let hook = this.#hooks.get(name);
    if (!hook) {
      hook = new SoleHook<unknown>(`hook "${name}"`, missing(name));
      this.#hooks.set(name, hook);
    }
    return hook;
  }

  /** Offers a hook under a name; a second provider of the same name is an error naming both. */
  provide<K extends keyof CustomHooks & string>(name: K, value: CustomHooks[K], provider: string): void {
    this.#hook(name).provide(value, provider);
  }

  /** The hook; a 503 naming the hook when no enabled plugin provides it. */
  get<K extends keyof CustomHooks & string>(name: K): CustomHooks[K] {
    return this.#hook(name).get() as CustomHooks[K];
  }

  /** The hook or undefined, for optional collaborations. */
  maybe<K extends keyof CustomHooks & string>(name: K): CustomHooks[K] | undefined {
    return this.#hook(name).maybe() as CustomHooks[K] | undefined;
  }

  /** The names provided so far. */
  names(): string[] {
    return [...this.#hooks].filter(([, h]) => h.provided).map(([n]) => n);
  }
}

/** The sole hooks of {@link Hooks}: those exactly one plugin provides. */
export const SOLE_HOOK_NAMES = ['tls', 'keys', 'models', 'inference', 'serviceManager', 'network', 'gpuMonitor'] as const;

/**
 * What a plugin declares in `provides`, `requires` and `uses`: a sole hook of {@link Hooks} or the name
 * of an extension (`CustomHooks`).
 */
export type HookName = (typeof SOLE_HOOK_NAMES)[number] | (keyof CustomHooks & string) | (string & {});

/** Whether the hook `name` (a sole hook or an extension) has its provider. */
export function isProvided(hooks: Hooks, name: string): boolean {
  if ((SOLE_HOOK_NAMES as readonly string[]).includes(name)) return (hooks[name as (typeof SOLE_HOOK_NAMES)[number]] as SoleHook<unknown>).provided;
  return hooks.extensions.names().includes(name);
}

export interface Hooks {
  /** Auth strategies, asked in order for every non-public route. */
  readonly auth: Registry<AuthStrategy>;
  /** Inference backends and the model formats they serve (see `backend-registry.ts`). */
  readonly backends: BackendRegistry;
  /** GPU probes; the GPU monitor uses the first whose `detect()` is true. */
  readonly gpu: Registry<GpuProvider & { name: string }>;
  /** The managed services (the configuration's list and those plugins declare) and their state. */
  readonly services: ServiceRegistry;
  /** Per-service log buffers (`/system/logs` in the embedded default). */
  readonly logs: LogHub;
  /** Writes operator-facing text to the console (the device's screen), never to the log. */
  readonly console: (text: string) => void;
  /** Sections of the boot banner (CA fingerprint, key file, ...). */
  readonly banner: Registry<BannerSection>;
  /** Error bodies per API surface (OpenAI's under `/v1`, ...). */
  readonly errorFormats: Registry<ErrorFormat>;
  /** Hooks plugins define for each other. */
  readonly extensions: Extensions;
  /**
   * Told of every answered request (method, route pattern, status, duration). Core calls them from
   * its own `onResponse` hook, which covers every plugin's routes, where a plugin's own hooks see
   * only the routes of its context.
   */
  readonly requestObservers: Registry<RequestObserver>;
  /** Told of the inference engine's events (requests, tokens, loads, crashes); the engine calls them. */
  readonly inferenceObservers: Registry<InferenceObserver>;
  /** Models without local files (upstream engines) that the model store lists and resolves beside its own. */
  readonly modelSources: Registry<ModelSource>;
  /** The GPU monitor's last reading (host-gpu). */
  readonly gpuMonitor: SoleHook<GpuMonitor>;
  readonly tls: SoleHook<TlsProvider>;
  readonly keys: SoleHook<KeyStore>;
  readonly models: SoleHook<ModelStore>;
  readonly inference: SoleHook<InferenceService>;
  readonly serviceManager: SoleHook<ServiceManager>;
  readonly network: SoleHook<NetworkProvider>;
}

/**
 * The advice of a sole hook nobody provides. Core names no plugin: whichever enabled plugin declares the hook
 * in `provides` fills it (the start names the built-in provider when a plugin `requires` it).
 */
function missing(hook: string): string {
  return `no enabled plugin provides "${hook}"; enable the plugin that declares it in "provides"`;
}

/** The hooks of one appliance; `services` is the configuration's list of the services it has. */
export function createHooks(logs: LogHub, console: (text: string) => void, services: readonly string[] = []): Hooks {
  return {
    console,
    banner: new Registry<BannerSection>('banner section'),
    errorFormats: new Registry<ErrorFormat>('error format'),
    extensions: new Extensions(),
    requestObservers: new Registry<RequestObserver>('request observer'),
    inferenceObservers: new Registry<InferenceObserver>('inference observer'),
    modelSources: new Registry<ModelSource>('model source'),
    gpuMonitor: new SoleHook<GpuMonitor>('the GPU monitor', missing('gpuMonitor')),
    auth: new Registry<AuthStrategy>('auth strategy'),
    backends: new BackendRegistry(),
    gpu: new Registry<GpuProvider & { name: string }>('GPU provider'),
    services: new ServiceRegistry(services),
    logs,
    tls: new SoleHook<TlsProvider>('TLS', missing('tls')),
    keys: new SoleHook<KeyStore>('the key store', missing('keys')),
    models: new SoleHook<ModelStore>('the model store', missing('models')),
    inference: new SoleHook<InferenceService>('inference', missing('inference')),
    serviceManager: new SoleHook<ServiceManager>('service management', missing('serviceManager')),
    network: new SoleHook<NetworkProvider>('network management', missing('network')),
  };
}
