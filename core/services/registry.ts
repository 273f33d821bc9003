/**
 * The registry of the appliance's managed services. Core knows no service by name: the
 * configuration's `services` lists the services the appliance has (the interface's six, in
 * `config/lia.default.yaml`), and each plugin declares the services it runs in its spec
 * (`PluginSpec.services`); core declares `svc-proxy`, its own HTTPS front door. In the embedded
 * default every service is a role of this process: the plugin that declares a service attaches
 * `start`/`stop` handlers to it, and the registry keeps the state in systemd's vocabulary so
 * `/health` and `/system/services` can report it. A listed service that no enabled plugin
 * declares stays `inactive` with sub-state `dead` and `implemented: false`.
 *
 * Start order: the order of the configuration's `services`, then the other declared services in
 * the order their plugins are set up; a service declared with `after` starts after the services
 * it names (those that exist). Services stop in the reverse order.
 *
 * @module
 */
import type { ServiceActiveState } from '../contracts/host.js';

/** A service name: lower case, digits and `-` (`svc-inference`); the unit name under systemd. */
export type ServiceName = string;

/** What a valid service name looks like. */
export const SERVICE_NAME_PATTERN = /^[a-z][a-z0-9-]{0,63}$/;

/** A service a plugin runs, as its spec declares it (`PluginSpec.services`). */
export interface ServiceDeclaration {
  /** The service's name (`svc-inference`): a unit of its own under systemd. */
  readonly name: string;
  /** Human description (systemd `Description=`). */
  readonly description: string;
  /** A required service that is not active makes `/health` answer 503. Defaults to `true`. */
  readonly required?: boolean;
  /** Services this one starts after (and stops before), when they exist. Defaults to none. */
  readonly after?: readonly string[];
}

/** How a plugin runs a service it declared. */
export interface ServiceRole {
  /** Human description; defaults to the declaration's. */
  description?: string;
  /** A required service that is not active makes `/health` answer 503; defaults to the declaration's. */
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
  #declared = new Map<ServiceName, { by: string; after: readonly string[] }>();
  #listeners: Listener[] = [];

  /** `appliance`: the services the appliance has (the configuration's `services`), in start order. */
  constructor(appliance: readonly string[] = []) {
    for (const name of appliance) this.#add(name, name, false);
  }

  /**
   * Declares a service that the plugin `by` runs (core calls it for every enabled plugin's
   * `services` before any setup). A name declared twice or not matching
   * {@link SERVICE_NAME_PATTERN} is an error naming both declarers.
   */
  declare(service: ServiceDeclaration, by: string): void {
    const other = this.#declared.get(service.name);
    if (other) throw new Error(`service "${service.name}" is declared by both "${other.by}" and "${by}"; enable only one of them`);
    if (!SERVICE_NAME_PATTERN.test(service.name))
      throw new Error(`plugin "${by}" declares service "${service.name}": a service name is lower case letters, digits and "-"`);
    this.#declared.set(service.name, { by, after: service.after ?? [] });
    const state = this.#states.get(service.name) ?? this.#add(service.name, service.description, service.required ?? true);
    state.description = service.description;
    state.required = service.required ?? true;
  }

  /** The plugin (or `core`) that declared `name`, or undefined. */
  declaredBy(name: string): string | undefined {
    return this.#declared.get(name)?.by;
  }

  /** Whether the appliance has a service of that name (listed in the configuration or declared). */
  has(name: string): boolean {
    return this.#states.has(name);
  }

  /** Every service's name, in start order. */
  names(): ServiceName[] {
    return this.#order();
  }

  /** Attaches the plugin that implements `name`. One role per service. */
  implement(name: ServiceName, role: ServiceRole): void {
    if (this.#roles.has(name)) throw new Error(`service ${name} is implemented twice`);
    if (!this.#declared.has(name)) throw new Error(`service ${name} is not declared; list it in the plugin's "services"`);
    this.#roles.set(name, role);
    const state = this.#state(name);
    if (role.description !== undefined) state.description = role.description;
    if (role.required !== undefined) state.required = role.required;
    state.implemented = true;
  }

  isImplemented(name: ServiceName): boolean {
    return this.#roles.has(name);
  }

  get(name: ServiceName): Readonly<ServiceState> {
    return { ...this.#state(name) };
  }

  list(): Readonly<ServiceState>[] {
    return this.#order().map((n) => this.get(n));
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

  /** Starts every implemented service, in start order. */
  async startAll(): Promise<void> {
    for (const name of this.#order()) if (this.#roles.has(name)) await this.start(name);
  }

  /** Stops every active service, in reverse order; failures are collected, not thrown. */
  async stopAll(): Promise<unknown[]> {
    const errors: unknown[] = [];
    for (const name of this.#order().reverse()) {
      if (!this.#roles.has(name)) continue;
      try {
        await this.stop(name);
      } catch (err) {
        errors.push(err);
      }
    }
    return errors;
  }

  #add(name: ServiceName, description: string, required: boolean): ServiceState {
    const state: ServiceState = { name, description, required, implemented: false, state: 'inactive', subState: 'dead', since: new Date(), lastError: null };
    this.#states.set(name, state);
    return state;
  }

  /** Insertion order (the configuration's list, then declarations), each service after those it names in `after`. */
  #order(): ServiceName[] {
    const out: ServiceName[] = [];
    const visiting = new Set<ServiceName>();
    const visit = (name: ServiceName): void => {
      if (out.includes(name) || visiting.has(name)) return; // a cycle keeps insertion order
      visiting.add(name);
      for (const before of this.#declared.get(name)?.after ?? []) if (this.#states.has(before)) visit(before);
      visiting.delete(name);
      out.push(name);
    };
    for (const name of this.#states.keys()) visit(name);
    return out;
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
    if (error !== undefined) s.lastError = error instanceof Error ? error.message : typeof error === 'string' ? error : JSON.stringify(error);
    else if (state === 'active') s.lastError = null;
    for (const l of this.#listeners) l({ ...s });
  }
}
