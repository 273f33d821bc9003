/**
 * Reads the device list out of `vulkaninfo`'s text report (Vulkan-Tools, the `vulkan-tools`
 * package): one `GPU<n>:` block per physical device in its "Device Properties and Extensions"
 * part, with the device's `VkPhysicalDeviceProperties` (name, vendor id, type) and
 * `VkPhysicalDeviceMemoryProperties` (heaps; `budget` and `usage` lines only where the driver has
 * `VK_EXT_memory_budget`). The text form is used because it is what every vulkaninfo release
 * prints without flags; its JSON form is a profile written to a file.
 *
 * @module
 */
import type { GpuDevice } from 'lia/plugin/contracts';

/** A physical device as vulkaninfo reports it, before the visibility rule is applied. */
export interface VulkanDevice extends GpuDevice {
  index: number;
  vendor: string;
  type: NonNullable<GpuDevice['type']>;
}

/** PCI vendor ids (and Khronos-registered ids above 0x10000) that Vulkan drivers report. */
const VENDORS: Record<number, string> = {
  0x10de: 'nvidia',
  0x1002: 'amd',
  0x1022: 'amd',
  0x8086: 'intel',
  0x13b5: 'arm',
  0x5143: 'qualcomm',
  0x106b: 'apple',
  0x1ae0: 'google',
  0x10005: 'mesa',
};

const TYPES: Record<string, VulkanDevice['type']> = {
  PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: 'discrete',
  PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: 'integrated',
  PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: 'virtual',
  PHYSICAL_DEVICE_TYPE_CPU: 'cpu',
  PHYSICAL_DEVICE_TYPE_OTHER: 'other',
};

const MIB = 1024 * 1024;

function field(block: string, name: string): string | undefined {
  return new RegExp(`^\\s*${name}\\s*=\\s*(.+?)\\s*$`, 'm').exec(block)?.[1];
}

interface Heap {
  size: number;
  budget: number | null;
  usage: number | null;
  deviceLocal: boolean;
}

function heaps(block: string): Heap[] {
  const start = block.indexOf('memoryHeaps:');
  if (start < 0) return [];
  const end = block.indexOf('memoryTypes:', start);
  const text = block.slice(start, end < 0 ? undefined : end);
  return text
    .split(/^\s*memoryHeaps\[\d+\]:\s*$/m)
    .slice(1)
    .map((h) => {
      const bytes = (name: string): number | null => {
        const raw = field(h, name);
        const n = raw === undefined ? NaN : Number(raw.split(/\s/)[0]);
        return Number.isFinite(n) ? n : null;
      };
      return { size: bytes('size') ?? 0, budget: bytes('budget'), usage: bytes('usage'), deviceLocal: h.includes('MEMORY_HEAP_DEVICE_LOCAL_BIT') };
    });
}

/**
 * Every physical device in a vulkaninfo report. A device's memory is its largest device-local
 * heap (a discrete card also has a small one, the host-visible window of its BAR); what is in use
 * is that heap's size less what the budget leaves this process (`budget - usage`), or 0 when the
 * driver reports no budget. Throws when the text has no device block (an error message, garbage).
 */
export function parseVulkaninfo(text: string): VulkanDevice[] {
  const part = text.indexOf('Device Properties and Extensions');
  if (part < 0) throw new Error(`unexpected vulkaninfo output: ${text.trim().split('\n')[0]?.slice(0, 120) ?? ''}`);
  const blocks = text.slice(part).split(/^GPU(\d+):\s*$/m);
  const devices: VulkanDevice[] = [];
  for (let i = 1; i + 1 < blocks.length; i += 2) {
    const block = blocks[i + 1]!;
    const name = field(block, 'deviceName');
    const vendorId = Number(field(block, 'vendorID'));
    if (!name) throw new Error(`unexpected vulkaninfo output: GPU${blocks[i]} has no deviceName`);
    const local = heaps(block)
      .filter((h) => h.deviceLocal)
      .sort((a, b) => b.size - a.size)[0];
    const free = local && local.budget !== null ? local.budget - (local.usage ?? 0) : null;
    devices.push({
      index: Number(blocks[i]),
      name,
      vendor: VENDORS[vendorId] ?? (Number.isFinite(vendorId) ? `0x${vendorId.toString(16)}` : 'unknown'),
      type: TYPES[field(block, 'deviceType') ?? ''] ?? 'other',
      vram_total_mb: local ? Math.round(local.size / MIB) : 0,
      vram_used_mb: local && free !== null ? Math.max(0, Math.round((local.size - free) / MIB)) : 0,
      temp_c: null,
      utilization_percent: null,
    });
  }
  if (devices.length === 0) throw new Error('unexpected vulkaninfo output: no GPU block');
  return devices;
}

/**
 * The devices llama.cpp's Vulkan back end uses: with `GGML_VK_VISIBLE_DEVICES` (a comma-separated
 * list of vulkaninfo indices) exactly those, a CPU-type device such as Mesa's lavapipe included;
 * without it every device that is not a CPU.
 */
export function visibleVulkanDevices(devices: readonly VulkanDevice[], visible: string | undefined): VulkanDevice[] {
  if (visible === undefined || visible.trim() === '') return devices.filter((d) => d.type !== 'cpu');
  const wanted = new Set(
    visible
      .split(',')
      .map((s) => Number(s.trim()))
      .filter(Number.isInteger),
  );
  return devices.filter((d) => wanted.has(d.index));
}
