/**
 * GPUs that only Vulkan sees (an Intel GPU, an AMD card without ROCm, a device of another
 * vendor), through `vulkaninfo`: detected when the tool is installed and lists a device that
 * llama.cpp's Vulkan back end would use (see {@link visibleVulkanDevices}), so a machine whose
 * only Vulkan device is Mesa's CPU rasteriser (lavapipe) reports no GPU unless
 * `GGML_VK_VISIBLE_DEVICES` names it. It is registered after the NVIDIA and AMD probes, whose
 * tools also report temperature and busy time: with `vendor: auto` it answers only where they find
 * nothing.
 *
 * @module
 */
import type { GpuProvider } from 'lia/plugin';
import type { GpuReport } from 'lia/plugin/contracts';
import { firstLine, runTool } from 'lia/utils';
import which from 'which';
import { parseVulkaninfo, visibleVulkanDevices } from './vulkan-parse.js';

/** Options of the Vulkan provider. */
export interface VulkanOptions {
  /** The vulkaninfo executable. */
  command: string;
  /** llama.cpp's `GGML_VK_VISIBLE_DEVICES`: the device indices to use, or undefined for every GPU. */
  visibleDevices: string | undefined;
  /** Probe deadline in ms. */
  timeoutMs: number;
}

/** The Vulkan provider: one probe = one vulkaninfo run. */
export function vulkanProvider(options: VulkanOptions): GpuProvider & { name: string } {
  const probe = async (signal?: AbortSignal): Promise<GpuReport> => {
    const result = await runTool(options.command, [], { timeoutMs: options.timeoutMs, signal });
    if (result.code !== 0) {
      const said = firstLine(result.stderr) || firstLine(result.stdout);
      throw new Error(`vulkaninfo failed (exit ${result.code})${said ? ` — ${said}` : ''}`);
    }
    return { vendor: 'vulkan', source: 'vulkaninfo', devices: visibleVulkanDevices(parseVulkaninfo(result.stdout), options.visibleDevices) };
  };
  return {
    name: 'vulkan',
    vendor: 'vulkan',
    async detect() {
      if ((await which(options.command, { nothrow: true })) === null) return false;
      return (await probe().catch(() => null))?.devices.length ? true : false;
    },
    probe,
  };
}
