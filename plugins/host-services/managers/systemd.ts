/**
 * The systemd service manager: `systemctl show` for the state of the six units, `systemctl
 * --no-block <action>` to act (the job is queued, the API answers 202), `journalctl -u UNIT -n N
 * -o json` for logs. Every call is an argument array (never a shell) with a deadline; the unit
 * names come from the fixed allow-list, never from the request.
 *
 * @module
 */
import { Errors } from 'lia/plugin';
import type { LogLine, ServiceName } from 'lia/plugin/contracts';
import type { ServiceAction, ServiceManager, ServiceStatus } from '../public.js';
import { serviceManagerFailed } from '../errors.js';
import { firstLine, runTool, ToolError } from 'lia/utils';
import { parseJournalJson, parseShowBlocks, serviceStatusOf } from './systemd-parse.js';

/** The executables and the deadline of one call. */
export interface SystemdOptions {
  systemctl: string;
  journalctl: string;
  /** Deadline of one call in ms. */
  timeoutMs: number;
  /** The appliance's services (`hooks.services.names()`), each a unit `<name>.service`. */
  names: () => readonly ServiceName[];
}

const PROPERTIES = ['Id', 'Description', 'LoadState', 'ActiveState', 'SubState', 'MainPID', 'StateChangeTimestamp', 'UnitFileState'];

/** The unit of a service: `svc-inference` → `svc-inference.service`. */
export function unitOf(name: ServiceName): string {
  return `${name}.service`;
}

/** The service manager for a systemd host; actions are queued (`queuesActions`). */
export class SystemdServiceManager implements ServiceManager {
  readonly kind = 'systemd';
  readonly queuesActions = true;
  readonly #o: SystemdOptions;

  constructor(options: SystemdOptions) {
    this.#o = options;
  }

  async list(): Promise<ServiceStatus[]> {
    const names = this.#o.names();
    const units = names.map(unitOf);
    const args = ['show', '--no-pager', '--timestamp=unix', `--property=${PROPERTIES.join(',')}`, '--', ...units];
    const r = await this.#run(this.#o.systemctl, args);
    if (r.code !== 0) throw serviceManagerFailed(`systemctl show failed (exit ${r.code}): ${firstLine(r.stderr) || 'no message'}`);
    const blocks = parseShowBlocks(r.stdout);
    return names.map((name) => {
      const block = blocks.find((b) => b.get('Id') === unitOf(name)) ?? new Map([['LoadState', 'not-found']]);
      return serviceStatusOf(name, block);
    });
  }

  async act(name: string, action: ServiceAction): Promise<void> {
    const unit = unitOf(name);
    const r = await this.#run(this.#o.systemctl, ['--no-block', '--no-ask-password', action, '--', unit]);
    if (r.code !== 0) {
      const said = firstLine(r.stderr) || firstLine(r.stdout) || 'no message';
      if (/access denied|interactive authentication required/i.test(said)) {
        throw Errors.forbidden(`systemd refused to ${action} ${unit}: ${said} (is the polkit rule from systemd/ installed?)`);
      }
      throw serviceManagerFailed(`systemctl ${action} ${unit} failed (exit ${r.code}): ${said}`);
    }
  }

  async logs(name: string, lines: number): Promise<LogLine[]> {
    const unit = unitOf(name);
    const args = ['-q', '--no-pager', '-o', 'json', '-n', String(lines), '--output-fields=MESSAGE,PRIORITY', '-u', unit];
    const r = await this.#run(this.#o.journalctl, args, 64 * 1024 * 1024);
    if (r.code !== 0) throw serviceManagerFailed(`journalctl failed (exit ${r.code}): ${firstLine(r.stderr) || 'no message'}`);
    return parseJournalJson(r.stdout).slice(-lines);
  }

  async #run(file: string, args: string[], maxBytes?: number) {
    try {
      return await runTool(file, args, { timeoutMs: this.#o.timeoutMs, maxBytes });
    } catch (err) {
      if (err instanceof ToolError && err.reason === 'timeout') throw Errors.timeout(`${err.message}; the service manager did not answer`);
      throw serviceManagerFailed((err as Error).message);
    }
  }
}
