/**
 * The service manager contract (`plugins/host-services`): what runs the six services and what
 * `/system/status` answers.
 *
 * @module
 */
import type { LogLine, ServiceActiveState } from 'lia/plugin/contracts';

export interface ServiceStatus {
  name: string;
  description: string;
  state: ServiceActiveState;
  sub_state: string;
  /** ISO-8601 time of the last state change, or null. */
  since: string | null;
  main_pid: number | null;
  enabled: boolean;
}

export type ServiceAction = 'start' | 'stop' | 'restart';

/** Runs the six services: the embedded supervisor, or systemd. */
export interface ServiceManager {
  readonly kind: 'embedded' | 'systemd' | (string & {});
  /**
   * True when `act` only queues the job and returns before it completes (systemd's `--no-block`):
   * the API then answers 202 instead of 200. Defaults to false.
   */
  readonly queuesActions?: boolean;
  list(): Promise<ServiceStatus[]>;
  act(name: string, action: ServiceAction): Promise<void>;
  logs(name: string, lines: number): Promise<LogLine[]>;
}

/** What `GET /system/status` returns: exactly the fields of the service interface. */
export interface SystemStatus {
  hostname: string;
  cpu_percent: number;
  memory: { total_gb: number; used_percent: number };
  disk: { models: { total: string; used: string; free: string }; total: string };
  uptime_seconds: number;
  version: string;
}
