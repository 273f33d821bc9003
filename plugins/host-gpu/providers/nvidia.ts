/**
 * NVIDIA GPUs through `nvidia-smi --query-gpu=... --format=csv,noheader,nounits`: one line per GPU,
 * memory in MiB, temperature in °C. Fields a board does not report come back as `[N/A]` or
 * `[Not Supported]` and become `null`; the name sits between fixed fields, so a comma in it cannot
 * shift the others.
 *
 * @module
 */
import type { GpuProvider } from 'lia/plugin';
import type { GpuDevice, GpuReport } from 'lia/plugin/contracts';
import { firstLine, runTool } from 'lia/utils';
import which from 'which';

/** The fields asked for, in this order (the order gpustat and telegraf use). */
export const NVIDIA_QUERY = ['index', 'uuid', 'name', 'temperature.gpu', 'utilization.gpu', 'memory.used', 'memory.total'];

/** Exit codes of nvidia-smi that mean "no usable GPU" rather than a broken probe. */
const EXIT_REASONS: Record<number, string> = {
  6: 'no NVIDIA GPU was found',
  9: 'the NVIDIA driver is not loaded',
};

function numberOrNull(raw: string | undefined): number | null {
  if (raw === undefined) return null;
  const text = raw.trim();
  if (text === '' || text.startsWith('[') || /^n\/?a$/i.test(text)) return null;
  const value = Number(text);
  return Number.isFinite(value) ? value : null;
}

/**
 * Parses the CSV. Throws when no line has the expected shape (garbage); skips blank lines.
 */
export function parseNvidiaCsv(stdout: string): GpuDevice[] {
  const devices: GpuDevice[] = [];
  const lines = stdout
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.length > 0);
  for (const line of lines) {
    const parts = line.split(',').map((p) => p.trim());
    if (parts.length < NVIDIA_QUERY.length) throw new Error(`unexpected nvidia-smi output: ${line.slice(0, 120)}`);
    const tail = parts.slice(-4);
    const index = numberOrNull(parts[0]);
    const name = parts.slice(2, parts.length - 4).join(', ');
    const total = numberOrNull(tail[3]);
    if (index === null || !/^GPU-|^MIG-/.test(parts[1] ?? '') || name === '') {
      throw new Error(`unexpected nvidia-smi output: ${line.slice(0, 120)}`);
    }
    devices.push({
      index,
      name,
      vram_total_mb: total === null ? 0 : Math.round(total),
      vram_used_mb: Math.round(numberOrNull(tail[2]) ?? 0),
      temp_c: numberOrNull(tail[0]),
      utilization_percent: numberOrNull(tail[1]),
    });
  }
  return devices;
}

/** Options of the NVIDIA provider. */
export interface NvidiaOptions {
  /** The nvidia-smi executable. Defaults to `nvidia-smi` from PATH. */
  command: string;
  /** Probe deadline in ms. */
  timeoutMs: number;
  /** Where the driver announces itself. Defaults to `/proc/driver/nvidia/version`. */
  driverFile?: string;
}

/** The NVIDIA provider: detected when nvidia-smi is installed; one probe = one nvidia-smi run. */
export function nvidiaProvider(options: NvidiaOptions): GpuProvider & { name: string } {
  return {
    name: 'nvidia',
    vendor: 'nvidia',
    async detect() {
      return (await which(options.command, { nothrow: true })) !== null;
    },
    async probe(signal): Promise<GpuReport> {
      const args = [`--query-gpu=${NVIDIA_QUERY.join(',')}`, '--format=csv,noheader,nounits'];
      const result = await runTool(options.command, args, { timeoutMs: options.timeoutMs, signal });
      if (result.code !== 0) {
        const known = result.code === null ? undefined : EXIT_REASONS[result.code];
        const said = firstLine(result.stdout) || firstLine(result.stderr);
        throw new Error(`nvidia-smi failed (exit ${result.code})${known ? `: ${known}` : ''}${said ? ` — ${said}` : ''}`);
      }
      return { vendor: 'nvidia', source: 'nvidia-smi', devices: parseNvidiaCsv(result.stdout) };
    },
  };
}
