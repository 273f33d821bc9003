/**
 * Pure parsers for AMD GPU readings: `rocm-smi --json` (string values, memory in bytes, key casing
 * that drifts between ROCm releases), `amd-smi metric/static --json` (value/unit objects, either a
 * bare array or wrapped in `gpu_data`), and the amdgpu sysfs files.
 *
 * @module
 */
import type { GpuDevice } from 'lia/plugin/contracts';

const MIB = 1024 * 1024;

function num(raw: unknown): number | null {
  if (typeof raw === 'number') return Number.isFinite(raw) ? raw : null;
  if (typeof raw !== 'string') return null;
  const value = Number(raw.trim());
  return raw.trim() !== '' && Number.isFinite(value) ? value : null;
}

/** Case-insensitive key lookup: the first of `names` present in `record`. */
function pick(record: Record<string, unknown>, names: string[]): unknown {
  const lower = new Map(Object.entries(record).map(([k, v]) => [k.toLowerCase(), v]));
  for (const name of names) {
    const v = lower.get(name.toLowerCase());
    if (v !== undefined && v !== 'N/A') return v;
  }
  return undefined;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Parses `rocm-smi --showproductname --showmeminfo vram --showtemp --showuse --json`. */
export function parseRocmSmiJson(stdout: string): GpuDevice[] {
  const data: unknown = JSON.parse(stdout);
  if (!isObject(data)) throw new Error('rocm-smi did not print a JSON object');
  const cards = Object.entries(data)
    .filter(([key, value]) => /^card\d+$/.test(key) && isObject(value))
    .sort(([a], [b]) => Number(a.slice(4)) - Number(b.slice(4)));
  if (cards.length === 0) throw new Error('rocm-smi reported no card');
  return cards.map(([key, value]) => {
    const card = value as Record<string, unknown>;
    const total = num(pick(card, ['VRAM Total Memory (B)']));
    const used = num(pick(card, ['VRAM Total Used Memory (B)']));
    const name = pick(card, ['Card Series', 'Device Name', 'Card SKU', 'Card Model']);
    return {
      index: Number(key.slice(4)),
      name: typeof name === 'string' && name.trim() ? name.trim() : `AMD GPU ${key.slice(4)}`,
      vram_total_mb: total === null ? 0 : Math.round(total / MIB),
      vram_used_mb: used === null ? 0 : Math.round(used / MIB),
      temp_c: num(pick(card, ['Temperature (Sensor edge) (C)', 'Temperature (Sensor junction) (C)'])),
      utilization_percent: num(pick(card, ['GPU use (%)'])),
    };
  });
}

/** `{value, unit}` → the value in MiB (amd-smi prints MB, meaning MiB, for VRAM). */
function mib(field: unknown): number | null {
  if (!isObject(field)) return num(field);
  const value = num(field['value']);
  if (value === null) return null;
  const unit = (typeof field['unit'] === 'string' ? field['unit'] : 'MB').toUpperCase();
  if (unit === 'B') return value / MIB;
  if (unit === 'KB') return value / 1024;
  if (unit === 'GB') return value * 1024;
  return value;
}

/** `{value, unit}` or a bare value → the number. */
function valueOf(field: unknown): number | null {
  return isObject(field) ? num(field['value']) : num(field);
}

function gpuList(data: unknown): Record<string, unknown>[] {
  const list = isObject(data) && Array.isArray(data['gpu_data']) ? data['gpu_data'] : data;
  if (!Array.isArray(list)) throw new Error('amd-smi did not print a GPU list');
  return list.filter(isObject);
}

/** Parses `amd-smi metric --json` and (optionally) `amd-smi static --json` for the names. */
export function parseAmdSmiJson(metricStdout: string, staticStdout?: string): GpuDevice[] {
  const metrics = gpuList(JSON.parse(metricStdout));
  if (metrics.length === 0) throw new Error('amd-smi reported no GPU');
  const names = new Map<number, string>();
  if (staticStdout) {
    for (const gpu of gpuList(JSON.parse(staticStdout))) {
      const asic = isObject(gpu['asic']) ? gpu['asic'] : {};
      if (typeof asic['market_name'] === 'string') names.set(Number(gpu['gpu']), asic['market_name']);
    }
  }
  return metrics.map((gpu, i) => {
    const index = num(gpu['gpu']) ?? i;
    const mem = isObject(gpu['mem_usage']) ? gpu['mem_usage'] : {};
    const temp = isObject(gpu['temperature']) ? gpu['temperature'] : {};
    const usage = isObject(gpu['usage']) ? gpu['usage'] : {};
    const edge = valueOf(temp['edge']);
    return {
      index,
      name: names.get(index) ?? `AMD GPU ${index}`,
      vram_total_mb: Math.round(mib(mem['total_vram']) ?? 0),
      vram_used_mb: Math.round(mib(mem['used_vram']) ?? 0),
      temp_c: edge ?? valueOf(temp['hotspot']),
      utilization_percent: valueOf(usage['gfx_activity']),
    };
  });
}

/** One card's amdgpu sysfs readings (bytes and millidegrees as the kernel prints them). */
export interface SysfsCard {
  index: number;
  name: string | null;
  vramTotal: string | null;
  vramUsed: string | null;
  tempMilli: string | null;
  busyPercent: string | null;
}

/** Turns raw sysfs readings into devices; a card without a VRAM total is skipped. */
export function parseAmdSysfs(cards: SysfsCard[]): GpuDevice[] {
  return cards
    .filter((c) => num(c.vramTotal) !== null)
    .map((c) => {
      const temp = num(c.tempMilli);
      return {
        index: c.index,
        name: c.name?.trim() || `AMD GPU ${c.index}`,
        vram_total_mb: Math.round((num(c.vramTotal) ?? 0) / MIB),
        vram_used_mb: Math.round((num(c.vramUsed) ?? 0) / MIB),
        temp_c: temp === null ? null : temp / 1000,
        utilization_percent: num(c.busyPercent),
      };
    });
}
