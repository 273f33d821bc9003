/**
 * Host contracts core keeps: the GPU probe a third party implements (`hooks.gpu`), and the
 * vocabulary of core's service registry and log buffers. The service manager, the network and the
 * GPU monitor are their plugins' own (`lia/host-services`, `lia/host-network`, `lia/host-gpu`).
 * Host calls never block the event loop and never throw into a request: a probe that fails yields
 * a degraded answer.
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

/** A log line as `/system/logs` returns it. */
export interface LogLine {
  timestamp: string;
  /** syslog priority 0 (emerg) .. 7 (debug). */
  priority: number;
  message: string;
}
