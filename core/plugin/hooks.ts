/**
 * The typed hook interfaces through which plugins contribute to the appliance and reach each
 * other. Core creates one {@link Hooks} object per app; every plugin's `setup` receives it.
 *
 * - registries (`auth`, `backends`, `gpu`): many plugins may add to them;
 * - slots (`tls`, `models`, `inference`, `keys`, `serviceManager`, `network`): exactly one plugin
 *   provides each; reading an empty slot throws an error that names the plugin to enable.
 *
 * @module
 */
import type { AuthStrategy, KeyStore } from '../contracts/auth.js';
import type { GpuProvider, ServiceManager } from '../contracts/host.js';
import type { InferenceService } from '../contracts/inference.js';
import type { ModelStore } from '../contracts/model-store.js';
import type { NetworkProvider } from '../contracts/network.js';
import type { TlsProvider } from '../contracts/tls.js';
import { Errors } from '../errors.js';
import type { LogHub } from '../logging.js';
import { ServiceRegistry } from '../services/registry.js';
import { BackendRegistry } from './backend-registry.js';

export { BackendRegistry };

/** A place exactly one plugin fills. */
export class Slot<T> {
  #value: T | undefined;
  #provider: string | undefined;
  readonly #what: string;
  readonly #hint: string;

  constructor(what: string, hint: string) {
    this.#what = what;
    this.#hint = hint;
  }

  /** Fills the slot; a second provider is a configuration error. */
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

  list(): readonly T[] {
    return this.#items;
  }
}

export interface Hooks {
  /** Auth strategies, asked in order for every non-public route. */
  readonly auth: Registry<AuthStrategy>;
  /** Inference backends and the model formats they serve (see `backend-registry.ts`). */
  readonly backends: BackendRegistry;
  /** GPU probes; the GPU monitor uses the first whose `detect()` is true. */
  readonly gpu: Registry<GpuProvider & { name: string }>;
  /** The six managed services and their state. */
  readonly services: ServiceRegistry;
  /** Per-service log buffers (`/system/logs` in the embedded default). */
  readonly logs: LogHub;
  /** Writes operator-facing text to the console (the device's screen), never to the log. */
  readonly console: (text: string) => void;
  readonly tls: Slot<TlsProvider>;
  readonly keys: Slot<KeyStore>;
  readonly models: Slot<ModelStore>;
  readonly inference: Slot<InferenceService>;
  readonly serviceManager: Slot<ServiceManager>;
  readonly network: Slot<NetworkProvider>;
}

export function createHooks(logs: LogHub, console: (text: string) => void): Hooks {
  return {
    console,
    auth: new Registry<AuthStrategy>('auth strategy'),
    backends: new BackendRegistry(),
    gpu: new Registry<GpuProvider & { name: string }>('GPU provider'),
    services: new ServiceRegistry(),
    logs,
    tls: new Slot<TlsProvider>('TLS', 'enable the "pki-local-ca" plugin'),
    keys: new Slot<KeyStore>('the key store', 'enable the "auth-api-key" plugin'),
    models: new Slot<ModelStore>('the model store', 'enable the "model-store" plugin'),
    inference: new Slot<InferenceService>('inference', 'enable the "engine" plugin'),
    serviceManager: new Slot<ServiceManager>('service management', 'enable the "host-services" plugin'),
    network: new Slot<NetworkProvider>('network management', 'enable the "host-network" plugin'),
  };
}
