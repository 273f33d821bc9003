/**
 * The embedded supervisor: the six services are roles of this process, kept by core's
 * ServiceRegistry; actions run the roles' own start/stop (stopping `svc-inference` unloads the
 * models and makes inference answer 503, and so on). Logs come from the LogHub ring buffers,
 * preceded by the history the log files kept from earlier runs.
 *
 * @module
 */
import { Errors, type LogHub, type ServiceRegistry } from 'lia/plugin';
import type { LogLine } from 'lia/plugin/contracts';
import type { ServiceAction, ServiceManager, ServiceStatus } from '../public.js';
import { serviceManagerFailed } from '../errors.js';

/** The embedded default's service manager over core's ServiceRegistry and LogHub. */
export class EmbeddedServiceManager implements ServiceManager {
  readonly kind = 'embedded';
  readonly queuesActions = false;
  readonly #services: ServiceRegistry;
  readonly #logs: LogHub;
  readonly #history: Map<string, LogLine[]>;

  /** @param history lines of earlier runs, oldest first, per service (from the log files). */
  constructor(services: ServiceRegistry, logs: LogHub, history = new Map<string, LogLine[]>()) {
    this.#services = services;
    this.#logs = logs;
    this.#history = history;
  }

  async list(): Promise<ServiceStatus[]> {
    return this.#services.list().map((s) => ({
      name: s.name,
      description: s.implemented ? s.description : `${s.name} (no enabled plugin provides it)`,
      state: s.state,
      sub_state: s.implemented ? s.subState : 'not-provided',
      since: s.since.toISOString(),
      main_pid: s.state === 'active' || s.state === 'activating' || s.state === 'deactivating' ? process.pid : null,
      enabled: s.implemented,
    }));
  }

  async act(name: string, action: ServiceAction): Promise<void> {
    if (!this.#services.has(name)) throw Errors.notFound(`no such service: ${name}`);
    if (!this.#services.isImplemented(name)) {
      throw Errors.conflict(`${name} cannot ${action}: no enabled plugin provides it (enable it in the configuration)`);
    }
    try {
      await this.#services[action](name);
    } catch (err) {
      throw serviceManagerFailed(`${name} failed to ${action}: ${(err as Error).message}`, { cause: err });
    }
  }

  async logs(name: string, lines: number): Promise<LogLine[]> {
    const recent = this.#logs.tail(name, lines);
    if (recent.length >= lines) return recent;
    const older = this.#history.get(name) ?? [];
    return [...older.slice(Math.max(0, older.length - (lines - recent.length))), ...recent];
  }
}
