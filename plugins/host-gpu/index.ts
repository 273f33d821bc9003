/**
 * The `host-gpu` plugin (service `svc-gpu-monitor`): registers the NVIDIA, AMD and Vulkan probes in
 * `hooks.gpu`, samples the detected GPUs in the background and serves `GET /system/gpu`.
 * Stopping the service freezes the answer with `stale: true`; starting it resumes sampling.
 *
 * @module
 */
import { Type } from '@sinclair/typebox';
import { definePlugin } from 'lia/plugin';
import { amdProvider } from './providers/amd.js';
import { nvidiaProvider } from './providers/nvidia.js';
import { vulkanProvider } from './providers/vulkan.js';
import { gpuRoutes } from './routes.js';
import { GpuSampler } from './sampler.js';

const options = Type.Object(
  {
    /** `auto` (detect: NVIDIA, then AMD, then Vulkan), `nvidia`, `amd`, `vulkan`, `none`, or the name of a provider another plugin registers. Defaults to `auto`. */
    vendor: Type.String({ default: 'auto', minLength: 1 }),
    /** The nvidia-smi executable (a name looked up in PATH, or a path). Defaults to `nvidia-smi`. */
    nvidiaSmi: Type.String({ default: 'nvidia-smi', minLength: 1 }),
    /** The rocm-smi executable. Defaults to `rocm-smi`. */
    rocmSmi: Type.String({ default: 'rocm-smi', minLength: 1 }),
    /** The amd-smi executable. Defaults to `amd-smi`. */
    amdSmi: Type.String({ default: 'amd-smi', minLength: 1 }),
    /** AMD source: `auto` (rocm-smi, else amd-smi, else sysfs), `rocm-smi`, `amd-smi` or `sysfs`. Defaults to `auto`. */
    amdTool: Type.Union([Type.Literal('auto'), Type.Literal('rocm-smi'), Type.Literal('amd-smi'), Type.Literal('sysfs')], { default: 'auto' }),
    /** The vulkaninfo executable (Debian's `vulkan-tools`). Defaults to `vulkaninfo`. */
    vulkaninfo: Type.String({ default: 'vulkaninfo', minLength: 1 }),
    /**
     * The Vulkan devices to report, as llama.cpp's `GGML_VK_VISIBLE_DEVICES` names them (vulkaninfo
     * indices, comma-separated; a CPU-type device is used only when named). Defaults to that
     * variable, else every device that is not a CPU.
     */
    vulkanDevices: Type.Optional(Type.Union([Type.String({ pattern: '^\\s*\\d+(\\s*,\\s*\\d+)*\\s*$' }), Type.Integer({ minimum: 0 })])),
    /** Root of sysfs for the amdgpu fallback. Defaults to `/sys`. */
    sysfsRoot: Type.String({ default: '/sys', minLength: 1 }),
    /** Milliseconds between readings. Defaults to 5000. */
    intervalMs: Type.Integer({ default: 5000, minimum: 250 }),
    /** Deadline of one probe in milliseconds; a slower tool gives a degraded answer. Defaults to 5000. */
    timeoutMs: Type.Integer({ default: 5000, minimum: 100 }),
  },
  { additionalProperties: false },
);

/** The host-gpu plugin. */
export default definePlugin({
  name: 'host-gpu',
  apiVersion: 1,
  provides: ['gpuMonitor'],
  description: 'GPU monitor (svc-gpu-monitor): NVIDIA, AMD and Vulkan probes sampled in the background, GET /system/gpu',
  services: [{ name: 'svc-gpu-monitor', description: 'GPU monitor: samples GPU memory and temperature', required: false }],
  options,
  env: { LIA_GPU_VENDOR: 'vendor', LIA_NVIDIA_SMI: 'nvidiaSmi', LIA_ROCM_SMI: 'rocmSmi', GGML_VK_VISIBLE_DEVICES: 'vulkanDevices' },
  async setup(app, ctx) {
    const { hooks } = ctx;
    const o = ctx.options;
    hooks.gpu.register(nvidiaProvider({ command: o.nvidiaSmi, timeoutMs: o.timeoutMs }));
    hooks.gpu.register(amdProvider({ tool: o.amdTool, rocmSmi: o.rocmSmi, amdSmi: o.amdSmi, sysfsRoot: o.sysfsRoot, timeoutMs: o.timeoutMs }));
    hooks.gpu.register(
      vulkanProvider({ command: o.vulkaninfo, visibleDevices: o.vulkanDevices === undefined ? undefined : String(o.vulkanDevices), timeoutMs: o.timeoutMs }),
    );

    const sampler = new GpuSampler(() => hooks.gpu.list(), { vendor: o.vendor, intervalMs: o.intervalMs, timeoutMs: o.timeoutMs });
    hooks.gpuMonitor.provide({ latest: () => sampler.snapshot() }, ctx.name);
    hooks.services.implement('svc-gpu-monitor', {
      async start() {
        await sampler.start();
        const s = sampler.snapshot();
        ctx.log.info({ vendor: s.vendor, devices: s.devices.length, error: s.error }, 'GPU monitor started');
      },
      async stop() {
        await sampler.stop();
        ctx.log.info('GPU monitor stopped; /system/gpu now answers the last reading as stale');
      },
    });
    app.addHook('onClose', async () => sampler.stop());
    gpuRoutes(app, sampler);
  },
});
