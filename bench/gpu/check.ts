/**
 * The whole GPU check in one command, for a machine with an NVIDIA GPU (issue 42): run it in a
 * checkout with `npm install` and `lia engine build` done, and the CUDA prebuilt
 * (`npm install @node-llama-cpp/linux-x64-cuda`) where CUDA is to be measured; without it the
 * Vulkan back end (a dependency) is used.
 *
 *   node --conditions=lia-source --import tsx bench/gpu/check.ts [--models 1b-q4_0,8b-q4_0] [--reps 2]
 *
 * 1. **The probe against the driver:** LIA's NVIDIA provider (what `/system/gpu` serves) is run
 *    and compared with `nvidia-smi -L` (names) and `nvidia-smi --query-gpu=memory.total
 *    --format=csv` (with units): the same devices, names and totals, or the check fails.
 * 2. **The engine on the GPU against llama-server:** `bench/engine/run.ts --gpu <cuda|vulkan>
 *    --slots 64 --context 1024` for each model (the 1.1B and the Llama-3-8B-shaped model, both
 *    built on first use with gguf-py): decode, first token, 4, 16 and 64 streams and a 512-token
 *    prompt, with every layer on the first device on both sides.
 *
 * Everything it prints is also written to `bench/results/gpu-check-<time>.log`. Exit code 1 when
 * the probe disagrees with the driver or a run fails.
 *
 * @module
 */
import { execFile, spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { nvidiaProvider } from '../../plugins/host-gpu/providers/nvidia.js';
import { cachedBinary } from '../../plugins/backend-llama-server/build.js';
import { findGpuBackend } from '../../plugins/backend-llama-server/devices.js';
import { ROOT } from '../../test/helpers/fixtures.js';

const { values } = parseArgs({ options: { models: { type: 'string', default: '1b-q4_0,8b-q4_0' }, reps: { type: 'string', default: '2' } } });
const run = promisify(execFile);
const results = path.join(ROOT, 'bench/results');
await mkdir(results, { recursive: true });
const logFile = path.join(results, `gpu-check-${new Date().toISOString().replaceAll(':', '-').replace('.', '-')}.log`);
const log = createWriteStream(logFile);
const say = (line: string): void => {
  console.log(line);
  log.write(`${line}\n`);
};
let failed = false;

// 1. The probe against the driver.
say(`# GPU check, ${new Date().toISOString()}`);
const report = await nvidiaProvider({ command: 'nvidia-smi', timeoutMs: 10_000 })
  .probe(AbortSignal.timeout(15_000))
  .catch((err: Error) => {
    say(`no NVIDIA GPU to check: ${err.message}`);
    log.end(() => process.exit(2));
    return new Promise<never>(() => {});
  });
say(`LIA's probe (${report.source}): ${JSON.stringify(report.devices)}`);
const listed = (await run('nvidia-smi', ['-L'])).stdout
  .split('\n')
  .map((l) => /^GPU (\d+): (.+?) \(UUID/.exec(l.trim()))
  .filter((m): m is RegExpExecArray => m !== null)
  .map((m) => ({ index: Number(m[1]), name: m[2]! }));
const totals = (await run('nvidia-smi', ['--query-gpu=memory.total', '--format=csv,noheader'])).stdout
  .split('\n')
  .map((l) => /^(\d+) MiB$/.exec(l.trim()))
  .filter((m): m is RegExpExecArray => m !== null)
  .map((m) => Number(m[1]));
say(`nvidia-smi -L: ${JSON.stringify(listed)}; memory.total (MiB): ${JSON.stringify(totals)}`);
const agrees =
  listed.length > 0 &&
  report.devices.length === listed.length &&
  report.devices.every((d, i) => d.index === listed[i]!.index && d.name === listed[i]!.name && d.vram_total_mb === totals[i]);
say(agrees ? 'probe: PASS (same devices, names and memory as the driver)' : 'probe: FAIL (LIA and nvidia-smi disagree)');
failed ||= !agrees;

// 2. The engine on the GPU against llama-server, per model.
const binary = await cachedBinary();
if (!binary) throw new Error('no llama-server build: run `node bin/lia.js engine build` first');
const gpu = findGpuBackend('cuda', binary) ? 'cuda' : findGpuBackend('vulkan', binary) ? 'vulkan' : null;
if (!gpu) throw new Error('neither a CUDA nor a Vulkan back end is installed (npm install @node-llama-cpp/linux-x64-cuda)');
say(`back end: ${gpu}`);
for (const model of values.models.split(',')) {
  const args = [
    '--conditions=lia-source',
    '--import',
    'tsx',
    'bench/engine/run.ts',
    '--model',
    model,
    '--gpu',
    gpu,
    '--slots',
    '64',
    '--context',
    '1024',
    '--reps',
    values.reps,
    '--no-library',
  ];
  say(`\n$ node ${args.join(' ')}`);
  const code = await new Promise<number | null>((resolve) => {
    const child = spawn(process.execPath, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    for (const stream of [child.stdout, child.stderr]) {
      stream.on('data', (chunk: Buffer) => {
        process.stdout.write(chunk);
        log.write(chunk);
      });
    }
    child.on('exit', resolve);
  });
  if (code !== 0) {
    say(`run on ${model}: FAIL (exit ${code})`);
    failed = true;
  }
}
say(`\nwritten to ${path.relative(ROOT, logFile)}`);
log.end();
process.exit(failed ? 1 : 0);
