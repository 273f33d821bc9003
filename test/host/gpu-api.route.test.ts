/**
 * `GET /system/gpu` through the real HTTPS server. NVIDIA and AMD tools cannot run here (no GPU),
 * so the providers are pointed at scripts that replay recorded real outputs: eight GPUs, a
 * driver that is not loaded, a tool that hangs, one that prints garbage, one that fails after a
 * good reading. Stopping svc-gpu-monitor freezes the answer with a stale marker.
 *
 * Probes run in the background and the boot waits for the first one only briefly, so the tests wait
 * for the reading they are about (polling the route) instead of assuming a probe is done by now.
 */
import { chmod, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { HOST_ONLY } from '../helpers/plugin-sets.js';
import { startTestAppliance, type TestAppliance } from '../helpers/appliance.js';
import { waitFor } from '../helpers/wait.js';
import which from 'which';
import { fakeTool, hostFixture } from './fake-tool.js';

interface GpuBody {
  vendor: string;
  devices: { index?: number; name: string; vram_total_mb: number; vram_used_mb: number; temp_c: number | null }[];
  source: string | null;
  sampled_at: string | null;
  stale: boolean;
  error: string | null;
}

async function start(t: Test, gpuOptions: Record<string, unknown>): Promise<TestAppliance> {
  const app = await startTestAppliance({ listen: false, plugins: { ...HOST_ONLY, 'host-gpu': { options: { sysfsRoot: '/nonexistent', ...gpuOptions } } } });
  t.teardown(() => app.close());
  return app;
}

/** No NVIDIA or AMD tool: what is left to find is Vulkan's. */
const NO_TOOLS = { nvidiaSmi: '/nonexistent/nvidia-smi', rocmSmi: '/nonexistent/rocm-smi', amdSmi: '/nonexistent/amd-smi' };

/** The real vulkaninfo, which `.ci/run` installs with Mesa's lavapipe (a Vulkan device on the CPU). */
function vulkaninfo(): string {
  const found = which.sync('vulkaninfo', { nothrow: true });
  if (!found) throw new Error('vulkaninfo is not installed: apt-get install vulkan-tools mesa-vulkan-drivers (.ci/run installs them)');
  return found;
}

/** One `GET /system/gpu`. The bound is far below the hanging tools' 30 s: an answer never waits for a probe. */
async function gpu(app: TestAppliance): Promise<GpuBody> {
  const res = await app.fetch('/system/gpu', { signal: AbortSignal.timeout(10_000) });
  if (res.status !== 200) throw new Error(`GET /system/gpu answered ${res.status}: ${await res.text()}`);
  return (await res.json()) as GpuBody;
}

/** The first answer for which `ready` holds (a probe has finished with the expected outcome). */
function gpuWhen(app: TestAppliance, what: string, ready: (body: GpuBody) => boolean): Promise<GpuBody> {
  return waitFor(what, async () => {
    const body = await gpu(app);
    return ready(body) && body;
  });
}

/** The answer once the first probe has finished, well or not. */
function firstReading(app: TestAppliance): Promise<GpuBody> {
  return gpuWhen(app, 'the first GPU reading', (b) => b.sampled_at !== null || b.error !== null);
}

t.test('a machine without a GPU answers vendor none and no devices', async (t) => {
  const app = await start(t, { ...NO_TOOLS, vulkaninfo: '/nonexistent/vulkaninfo' });
  const body = await gpu(app);
  t.equal(body.vendor, 'none');
  t.same(body.devices, []);
  t.equal(body.stale, false);
  t.equal(body.error, null);
  const noKey = await app.fetch('/system/gpu', { auth: false });
  t.equal(noKey.status, 401, 'the GPU report needs the key');
});

t.test('eight NVIDIA GPUs from nvidia-smi', async (t) => {
  const tool = await fakeTool('nvidia-smi', { stdout: 'nvidia/8x-titan-x.csv' });
  const app = await start(t, { nvidiaSmi: tool.path });
  const body = await firstReading(app);
  t.equal(body.vendor, 'nvidia');
  t.equal(body.source, 'nvidia-smi');
  t.equal(body.devices.length, 8);
  t.match(body.devices[1], { index: 1, name: 'GeForce GTX TITAN X', vram_total_mb: 12206, vram_used_mb: 10032, temp_c: 54 });
  t.equal(body.error, null);
  t.ok(body.sampled_at && Date.parse(body.sampled_at) > Date.now() - 60_000, 'sampled just now');
  const [first] = await tool.calls();
  t.same(first, ['--query-gpu=index,uuid,name,temperature.gpu,utilization.gpu,memory.used,memory.total', '--format=csv,noheader,nounits']);
});

t.test('a driver that is not loaded is a degraded answer with the reason', async (t) => {
  const tool = await fakeTool('nvidia-smi', { stdout: 'nvidia/driver-not-loaded.txt', exit: 9 });
  const app = await start(t, { nvidiaSmi: tool.path });
  const body = await firstReading(app);
  t.equal(body.vendor, 'nvidia');
  t.same(body.devices, []);
  t.match(body.error, /exit 9.*driver is not loaded.*NVIDIA-SMI has failed/);
});

t.test('"No devices were found" (exit 6) says so', async (t) => {
  const tool = await fakeTool('nvidia-smi', { stdout: 'nvidia/no-devices.txt', exit: 6 });
  const app = await start(t, { nvidiaSmi: tool.path });
  t.match((await firstReading(app)).error, /no NVIDIA GPU was found/);
});

t.test('a hanging nvidia-smi never holds a request', async (t) => {
  const tool = await fakeTool('nvidia-smi', { sleep: 30, stdout: 'nvidia/1x-titan-x.csv' });
  const app = await start(t, { nvidiaSmi: tool.path, timeoutMs: 500, intervalMs: 1000 });
  await firstReading(app);
  // The next probe hangs again meanwhile; the answers come from the cache all the same.
  const answers = await Promise.all(Array.from({ length: 5 }, () => gpu(app)));
  for (const body of answers) {
    t.equal(body.vendor, 'nvidia');
    t.match(body.error, /did not answer within 500 ms/);
    t.same(body.devices, []);
  }
});

t.test('a probe slower than boot does not hold the other services; the report is stale meanwhile', async (t) => {
  const tool = await fakeTool('nvidia-smi', { sleep: 30, stdout: 'nvidia/1x-titan-x.csv' });
  const app = await start(t, { nvidiaSmi: tool.path, timeoutMs: 20_000 });
  t.equal(app.hooks.services.get('svc-certs').state, 'active', 'the services after it started');
  const body = await gpu(app);
  t.match(body, { vendor: 'nvidia', devices: [], sampled_at: null, stale: true, error: null });
});

t.test('garbage from the tool is an error, not a misreading', async (t) => {
  const tool = await fakeTool('nvidia-smi', { text: 'Segmentation fault (core dumped)\n' });
  const app = await start(t, { nvidiaSmi: tool.path });
  const body = await firstReading(app);
  t.same(body.devices, []);
  t.match(body.error, /unexpected nvidia-smi output: Segmentation fault/);
});

t.test('after a good reading, a failing probe keeps the devices and reports the error', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'lia-flaky-'));
  const script = path.join(dir, 'nvidia-smi');
  const marker = path.join(dir, 'ran');
  const calls = path.join(dir, 'calls');
  // The first call reads 8 GPUs, every later one fails as a driver that went away.
  await writeFile(
    script,
    `#!/bin/sh\necho >> '${calls}'\nif [ -e '${marker}' ]; then cat '${hostFixture('nvidia/driver-not-loaded.txt')}'; exit 9; fi\ntouch '${marker}'\ncat '${hostFixture('nvidia/8x-titan-x.csv')}'\n`,
  );
  await chmod(script, 0o755);
  const probes = async () => (await readFile(calls, 'utf8').catch(() => '')).length;
  const app = await start(t, { nvidiaSmi: script, intervalMs: 250 });
  // The good reading may already be followed by failures when the first answer comes.
  const failed = await gpuWhen(app, 'a failed probe after the good one', (b) => b.error !== null);
  t.equal(failed.devices.length, 8, 'the last good devices stay');
  t.not(failed.sampled_at, null, 'with the time of the good reading');
  t.match(failed.error, /driver is not loaded/);
  const seen = await probes();
  await waitFor('two more failed probes', async () => (await probes()) >= seen + 2);
  const later = await gpu(app);
  t.equal(later.devices.length, 8, 'the devices stay through further failures');
  t.equal(later.sampled_at, failed.sampled_at, 'and so does the time of the last good reading');
  t.match(later.error, /driver is not loaded/);
});

t.test('stopping svc-gpu-monitor freezes the answer with a stale marker; starting resumes', async (t) => {
  const tool = await fakeTool('nvidia-smi', { stdout: 'nvidia/8x-titan-x.csv' });
  const app = await start(t, { nvidiaSmi: tool.path, intervalMs: 250 });
  await gpuWhen(app, 'a good reading', (b) => b.devices.length === 8);
  const stop = await app.fetch('/system/services/svc-gpu-monitor/stop', { method: 'POST' });
  t.equal(stop.status, 200);
  const frozen = await gpu(app);
  t.equal(frozen.stale, true);
  t.equal(frozen.devices.length, 8, 'the last reading is still shown');
  // A probe started just before the stop may still log its call: count from a settled log. The
  // waits span many intervals, so a monitor that kept probing would show up in the second count.
  const settled = async () => {
    await new Promise((r) => setTimeout(r, 4 * 250));
    return (await tool.calls()).length;
  };
  const calls = await settled();
  t.equal(await settled(), calls, 'no probe runs while stopped');
  t.equal((await gpu(app)).sampled_at, frozen.sampled_at);
  const startRes = await app.fetch('/system/services/svc-gpu-monitor/', {
    method: 'POST',
    body: JSON.stringify({ action: 'start' }),
    headers: { 'content-type': 'application/json' },
  });
  t.equal(startRes.status, 200);
  const fresh = await gpuWhen(app, 'a new reading after the start', (b) => b.sampled_at !== frozen.sampled_at);
  t.equal(fresh.stale, false);
  t.ok(Date.parse(fresh.sampled_at ?? '') > Date.parse(frozen.sampled_at ?? ''), 'a new reading');
});

t.test('AMD through rocm-smi --json', async (t) => {
  const tool = await fakeTool('rocm-smi', { stdout: 'amd/rocm-smi-rx7900xt.json' });
  const app = await start(t, { vendor: 'amd', amdTool: 'rocm-smi', rocmSmi: tool.path });
  const body = await firstReading(app);
  t.equal(body.vendor, 'amd');
  t.equal(body.source, 'rocm-smi');
  t.match(body.devices, [{ name: 'Radeon RX 7900 XT', vram_total_mb: 20464, vram_used_mb: 27 }]);
  t.same((await tool.calls())[0], ['--showproductname', '--showmeminfo', 'vram', '--showtemp', '--showuse', '--json']);
});

t.test('AMD through amd-smi metric/static --json', async (t) => {
  const tool = await fakeTool('amd-smi', {
    byArg: { metric: { stdout: 'amd/amd-smi-metric-rx7800xt.json' }, static: { stdout: 'amd/amd-smi-static-rx7800xt.json' } },
  });
  const app = await start(t, { vendor: 'amd', amdTool: 'amd-smi', amdSmi: tool.path });
  const body = await firstReading(app);
  t.equal(body.source, 'amd-smi');
  t.match(body.devices, [{ name: 'AMD Radeon RX 7800 XT', vram_total_mb: 16368, vram_used_mb: 14569, temp_c: 41 }]);
});

t.test('AMD detected from the amdgpu sysfs files when no tool is installed', async (t) => {
  const app = await startTestAppliance({
    listen: false,
    plugins: {
      ...HOST_ONLY,
      'host-gpu': {
        options: {
          nvidiaSmi: '/nonexistent/nvidia-smi',
          rocmSmi: '/nonexistent/rocm-smi',
          amdSmi: '/nonexistent/amd-smi',
          sysfsRoot: hostFixture('amdgpu-sysfs'),
        },
      },
    },
  });
  t.teardown(() => app.close());
  const body = await firstReading(app);
  t.equal(body.vendor, 'amd');
  t.equal(body.source, 'sysfs');
  t.match(body.devices, [{ name: 'AMD GPU 0', vram_total_mb: 16368, vram_used_mb: 660, temp_c: 47 }]);
});

t.test('a device only Vulkan sees: Mesa lavapipe through the real vulkaninfo, once GGML_VK_VISIBLE_DEVICES names it', async (t) => {
  const app = await start(t, { ...NO_TOOLS, vulkaninfo: vulkaninfo(), vulkanDevices: '0' });
  const body = await firstReading(app);
  t.equal(body.vendor, 'vulkan');
  t.equal(body.source, 'vulkaninfo');
  t.equal(body.error, null);
  t.match(body.devices, [{ index: 0, name: /llvmpipe/, vendor: 'mesa', type: 'cpu', vram_used_mb: 0, temp_c: null }]);
  t.ok((body.devices[0]?.vram_total_mb ?? 0) > 0, 'its memory heap is reported');
});

t.test('the same machine without the variable has no GPU: a CPU-type Vulkan device is not one', async (t) => {
  const app = await start(t, { ...NO_TOOLS, vulkaninfo: vulkaninfo() });
  const body = await gpu(app);
  t.equal(body.vendor, 'none');
  t.same(body.devices, []);
});
