/**
 * The registry of the six managed services. In the embedded default every service is a role of
 * this process: a plugin attaches `start`/`stop` handlers to the service it implements, and the
 * registry keeps the state in systemd's vocabulary so `/health` and `/system/services` can report
 * it. A service no plugin implements stays `inactive` with sub-state `dead`.
 *
 * @module
 */
import type { ServiceActiveState } from '../contracts/host.js';

/** The service names of the interface, exactly. */
export const SERVICE_NAMES = [
  'svc-inference',
  'svc-webui',
  'svc-proxy',
  'svc-gpu-monitor',
  'svc-system-api',
  'svc-certs',
] as const;
export type ServiceName = (typeof SERVICE_NAMES)[number];

export function isServiceName(value: string): value is ServiceName {
  return (SERVICE_NAMES as readonly string[]).includes(value);
}

export interface ServiceRole {
  /** Human description (systemd `Description=`). */
  description: string;
  /**
   * A required service that is not active makes `/health` answer 503.
   * Defaults to `true`.
   */
  required?: boolean;
  start(): Promise<void>;
  stop(): Promise<void>;
}

export interface ServiceState {
  name: ServiceName;
  description: string;
  required: boolean;
  implemented: boolean;
  state: ServiceActiveState;
  subState: string;
  since: Date;
  lastError: string | null;
}

type Listener = (state: ServiceState) => void;

export class ServiceRegistry {
  #roles = new Map<ServiceName, ServiceRole>();
  #states = new Map<ServiceName, ServiceState>();
  #listeners: Listener[] = [];

  constructor() {
    for (const name of SERVICE_NAMES) {
      this.#states.set(name, {
        name,
        description: name,
        required: false,
        implemented: false,
        state: 'inactive',
        subState: 'dead',
        since: new Date(),
        lastError: null,
      });
    }
  }

  /** Attaches the plugin that implements `name`. One role per service. */
  implement(name: ServiceName, role: ServiceRole): void {
    if (this.#roles.has(name)) throw new Error(`service ${name} is implemented twice`);
    this.#roles.set(name, role);
    const state = this.#state(name);
    state.description = role.description;
    state.required = role.required ?? true;
    state.implemented = true;
  }

  isImplemented(name: ServiceName): boolean {
    return this.#roles.has(name);
  }

  get(name: ServiceName): Readonly<ServiceState> {
    return { ...this.#state(name) };
  }

  list(): Readonly<ServiceState>[] {
    return SERVICE_NAMES.map((n) => this.get(n));
  }

  isActive(name: ServiceName): boolean {
    return this.#state(name).state === 'active';
  }

  onChange(listener: Listener): void {
    this.#listeners.push(listener);
  }

  async start(name: ServiceName): Promise<void> {
    const role = this.#roles.get(name);
    if (!role) throw new Error(`service ${name} is not provided by any enabled plugin`);
    const state = this.#state(name);
    if (state.state === 'active') return;
    this.#set(name, 'activating', 'start');
    try {
      await role.start();
      this.#set(name, 'active', 'running');
    } catch (err) {
      this.#set(name, 'failed', 'failed', err);
      throw err;
    }
  }

  async stop(name: ServiceName): Promise<void> {
    const role = this.#roles.get(name);
    if (!role) throw new Error(`service ${name} is not provided by any enabled plugin`);
    const state = this.#state(name);
    if (state.state === 'inactive') return;
    this.#set(name, 'deactivating', 'stop');
    try {
      await role.stop();
      this.#set(name, 'inactive', 'dead');
    } catch (err) {
      this.#set(name, 'failed', 'failed', err);
      throw err;
    }
  }

  async restart(name: ServiceName): Promise<void> {
    await this.stop(name);
    await this.start(name);
  }

  /** Marks a service failed from the outside (e.g. a runner crash the role noticed). */
  fail(name: ServiceName, error: unknown): void {
    this.#set(name, 'failed', 'failed', error);
  }

  /** Starts every implemented service, in interface order. */
  async startAll(): Promise<void> {
    for (const name of SERVICE_NAMES) if (this.#roles.has(name)) await this.start(name);
  }

  /** Stops every active service, in reverse order; failures are collected, not thrown. */
  async stopAll(): Promise<unknown[]> {
    const errors: unknown[] = [];
    for (const name of [...SERVICE_NAMES].reverse()) {
      if (!this.#roles.has(name)) continue;
      try {
        await this.stop(name);
      } catch (err) {
        errors.push(err);
      }
    }
    return errors;
  }

  #state(name: ServiceName): ServiceState {
    const state = this.#states.get(name);
    if (!state) throw new Error(`unknown service ${name}`);
    return state;
  }

  #set(name: ServiceName, state: ServiceActiveState, subState: string, error?: unknown): void {
    const s = this.#state(name);
    s.state = state;
    s.subState = subState;
    s.since = new Date();
    if (error !== undefined) s.lastError = error instanceof Error ? error.message : String(error);
    else if (state === 'active') s.lastError = null;
    for (const l of this.#listeners) l({ ...s });
  }
}
