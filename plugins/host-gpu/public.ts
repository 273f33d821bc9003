/**
 * `lia/host-gpu`: the public module of the `host-gpu` plugin: the GPU monitor it offers
 * (`hooks.extensions.get('gpuMonitor')`). The probes it samples are core's extension kind
 * (`GpuProvider` in `lia/plugin`, `hooks.gpu`). Types only. It follows the plugin API version of
 * `lia/plugin`: within one major, only additions; `etc/lia-host-gpu.api.md` records the surface.
 *
 * @module
 */
import type { GpuDevice } from 'lia/plugin/contracts';

/** The GPU monitor's last reading, as `hooks.extensions.get('gpuMonitor')` offers it (no probe is run to answer). */
export interface GpuMonitor {
  latest(): { vendor: string; devices: readonly GpuDevice[]; stale: boolean };
}

declare module 'lia/plugin' {
  interface CustomHooks {
    /** The GPU monitor's last reading (the `host-gpu` plugin). */
    gpuMonitor: GpuMonitor;
  }
}
