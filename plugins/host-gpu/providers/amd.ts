/**
 * AMD GPUs. The probe tries, in order of the `tool` option (`auto` = the first present):
 * `rocm-smi --json`, `amd-smi metric/static --json`, then the amdgpu sysfs files
 * (`/sys/class/drm/cardN/device/mem_info_vram_*`, `gpu_busy_percent`, `hwmon/*\/temp1_input`),
 * which need no tool at all.
 *
 * @module
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { GpuProvider } from 'lia/plugin';
import type { GpuReport } from 'lia/plugin/contracts';
import { firstLine, runTool } from 'lia/utils';
import which from 'which';
import { parseAmdSmiJson, parseAmdSysfs, parseRocmSmiJson, type SysfsCard } from './amd-parse.js';

/** Options of the AMD provider. */
export interface AmdOptions {
  /** `auto`, `rocm-smi`, `amd-smi` or `sysfs`. */
  tool: string;
  rocmSmi: string;
  amdSmi: string;
  /** Root of sysfs. Defaults to `/sys` (tests point it at a recorded tree). */
  sysfsRoot: string;
  timeoutMs: number;
}

async function read(file: string): Promise<string | null> {
  try {
    return (await readFile(file, 'utf8')).trim();
  } catch {
    return null;
  }
}

/** amdgpu cards under `<root>/class/drm`: vendor 0x1002 with a VRAM size file. */
export async function readAmdSysfs(root: string): Promise<SysfsCard[]> {
  const drm = path.join(root, 'class', 'drm');
  let entries: string[];
  try {
    entries = await readdir(drm);
  } catch {
    return [];
  }
  const cards: SysfsCard[] = [];
  for (const entry of entries.filter((e) => /^card\d+$/.test(e)).sort()) {
    const dev = path.join(drm, entry, 'device');
    if ((await read(path.join(dev, 'vendor'))) !== '0x1002') continue;
    let tempMilli: string | null = null;
    try {
      for (const hw of (await readdir(path.join(dev, 'hwmon'))).sort()) {
        tempMilli = await read(path.join(dev, 'hwmon', hw, 'temp1_input'));
        if (tempMilli !== null) break;
      }
    } catch {
      // no hwmon: temperature unknown
    }
    cards.push({
      index: Number(entry.slice(4)),
      name: await read(path.join(dev, 'product_name')),
      vramTotal: await read(path.join(dev, 'mem_info_vram_total')),
      vramUsed: await read(path.join(dev, 'mem_info_vram_used')),
      tempMilli,
      busyPercent: await read(path.join(dev, 'gpu_busy_percent')),
    });
  }
  return cards;
}

async function chooseTool(options: AmdOptions): Promise<'rocm-smi' | 'amd-smi' | 'sysfs'> {
  if (options.tool === 'rocm-smi' || options.tool === 'amd-smi' || options.tool === 'sysfs') return options.tool;
  if (await which(options.rocmSmi, { nothrow: true })) return 'rocm-smi';
  if (await which(options.amdSmi, { nothrow: true })) return 'amd-smi';
  return 'sysfs';
}

function failure(tool: string, code: number | null, stdout: string, stderr: string): Error {
  const said = firstLine(stderr) || firstLine(stdout);
  return new Error(`${tool} failed (exit ${code})${said ? `: ${said}` : ''}`);
}

/** The AMD provider: detected when rocm-smi or amd-smi is installed, or an amdgpu card is in sysfs. */
export function amdProvider(options: AmdOptions): GpuProvider & { name: string } {
  return {
    name: 'amd',
    vendor: 'amd',
    async detect() {
      if ((await chooseTool(options)) !== 'sysfs') return true;
      return (await readAmdSysfs(options.sysfsRoot)).length > 0;
    },
    async probe(signal): Promise<GpuReport> {
      const tool = await chooseTool(options);
      const run = { timeoutMs: options.timeoutMs, signal };
      if (tool === 'rocm-smi') {
        const args = ['--showproductname', '--showmeminfo', 'vram', '--showtemp', '--showuse', '--json'];
        const r = await runTool(options.rocmSmi, args, run);
        if (r.code !== 0) throw failure('rocm-smi', r.code, r.stdout, r.stderr);
        return { vendor: 'amd', source: 'rocm-smi', devices: parseRocmSmiJson(r.stdout) };
      }
      if (tool === 'amd-smi') {
        const metric = await runTool(options.amdSmi, ['metric', '--json'], run);
        if (metric.code !== 0) throw failure('amd-smi', metric.code, metric.stdout, metric.stderr);
        const stat = await runTool(options.amdSmi, ['static', '--asic', '--json'], run).catch(() => null);
        const names = stat && stat.code === 0 ? stat.stdout : undefined;
        return { vendor: 'amd', source: 'amd-smi', devices: parseAmdSmiJson(metric.stdout, names) };
      }
      const devices = parseAmdSysfs(await readAmdSysfs(options.sysfsRoot));
      if (devices.length === 0) throw new Error('no amdgpu card with VRAM figures under sysfs');
      return { vendor: 'amd', source: 'sysfs', devices };
    },
  };
}
