/**
 * Host provider contracts: the parts of the appliance that touch the machine (GPUs, the service
 * manager, the network). Each is a plugin behind one of these interfaces, chosen by the config or
 * detected (`plugins/host-*`). Host calls never block the event loop and never throw into a
 * request: a probe that fails yields a degraded answer.
 *
 * @module
 */

export interface GpuDevice {
  /** The tool's device index (nvidia-smi `index`, rocm-smi `cardN`), when it has one. */
  index?: number;
  name: string;
  vram_total_mb: number;
  vram_used_mb: number;
  temp_c: number | null;
  /** GPU busy percentage, or null when the board does not report it. */
  utilization_percent?: number | null;
  /** The hardware's maker (`nvidia`, `amd`, `intel`, `mesa`...), where the provider is not the vendor's own tool (Vulkan). */
  vendor?: string;
  /** What kind of device it is, where the provider tells (Vulkan's device type). */
  type?: 'discrete' | 'integrated' | 'virtual' | 'cpu' | 'other';
}

export interface GpuReport {
  /** `nvidia`, `amd`, `vulkan` (devices only Vulkan sees), or `none`. */
  vendor: string;
  devices: GpuDevice[];
  /** Which tool or file the figures came from (`nvidia-smi`, `rocm-smi`, `amd-smi`, `sysfs`, `vulkaninfo`). */
  source?: string;
}

export interface GpuProvider {
  /** `nvidia`, `amd`, `none`, ... */
  readonly vendor: string;
  /** True when this provider's tool or sysfs files are present on the machine. */
  detect(): Promise<boolean>;
  /** One reading; rejects on a probe failure (the sampler turns that into a degraded answer). */
  probe(signal: AbortSignal): Promise<GpuReport>;
}

/** systemd's ActiveState vocabulary. */
export type ServiceActiveState = 'active' | 'inactive' | 'failed' | 'activating' | 'deactivating';

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

/** A log line as `/system/logs` returns it. */
export interface LogLine {
  timestamp: string;
  /** syslog priority 0 (emerg) .. 7 (debug). */
  priority: number;
  message: string;
}

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
