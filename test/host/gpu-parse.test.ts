/**
 * GPU output parsers against recorded real tool outputs (test/fixtures/host, see its README):
 * nvidia-smi CSV with one and eight GPUs and `[N/A]` fields, rocm-smi JSON, amd-smi JSON, an
 * amdgpu sysfs tree, vulkaninfo's report, and garbage that must be rejected rather than misread.
 */
import { readFile } from 'node:fs/promises';
import t from 'tap';
import { parseNvidiaCsv } from '../../plugins/host-gpu/providers/nvidia.js';
import { parseAmdSmiJson, parseAmdSysfs, parseRocmSmiJson } from '../../plugins/host-gpu/providers/amd-parse.js';
import { readAmdSysfs } from '../../plugins/host-gpu/providers/amd.js';
import { parseVulkaninfo, visibleVulkanDevices } from '../../plugins/host-gpu/providers/vulkan-parse.js';
import { hostFixture } from './fake-tool.js';

const text = (f: string): Promise<string> => readFile(hostFixture(f), 'utf8');

t.test('nvidia-smi: eight GPUs, memory in MiB, temperature in °C', async (t) => {
  const devices = parseNvidiaCsv(await text('nvidia/8x-titan-x.csv'));
  t.equal(devices.length, 8);
  t.same(devices[0], { index: 0, name: 'GeForce GTX TITAN X', vram_total_mb: 12206, vram_used_mb: 802, temp_c: 25, utilization_percent: 0 });
  t.same(devices[1], { index: 1, name: 'GeForce GTX TITAN X', vram_total_mb: 12206, vram_used_mb: 10032, temp_c: 54, utilization_percent: 86 });
  t.same(
    devices.map((d) => d.index),
    [0, 1, 2, 3, 4, 5, 6, 7],
  );
});

t.test('nvidia-smi: [N/A] fields become null, not zero or NaN', async (t) => {
  const [d] = parseNvidiaCsv(await text('nvidia/jetson-orin-na.csv'));
  t.same(d, { index: 0, name: 'Orin (nvgpu)', vram_total_mb: 0, vram_used_mb: 0, temp_c: null, utilization_percent: null });
});

t.test('nvidia-smi: a comma in the name does not shift the figures', async (t) => {
  const [d] = parseNvidiaCsv('0, GPU-aaaa, NVIDIA RTX 6000 Ada, Generation, 40, 3, 100, 49140\n');
  t.equal(d?.name, 'NVIDIA RTX 6000 Ada, Generation');
  t.equal(d?.vram_total_mb, 49140);
  t.equal(d?.temp_c, 40);
});

t.test('nvidia-smi: garbage and error text are rejected', async (t) => {
  t.throws(() => parseNvidiaCsv('<html>oops</html>\n'), /unexpected nvidia-smi output/);
  t.throws(() => parseNvidiaCsv('a, b, c, d, e, f, g\n'), /unexpected nvidia-smi output/);
  const driverMessage = await text('nvidia/driver-not-loaded.txt');
  t.throws(() => parseNvidiaCsv(driverMessage), /unexpected nvidia-smi output/);
  t.same(parseNvidiaCsv('\n\n'), [], 'no lines at all is no GPU, not an error');
});

t.test('rocm-smi --json: bytes to MiB, product name, utilisation', async (t) => {
  const devices = parseRocmSmiJson(await text('amd/rocm-smi-rx7900xt.json'));
  t.same(devices, [{ index: 0, name: 'Radeon RX 7900 XT', vram_total_mb: 20464, vram_used_mb: 27, temp_c: null, utilization_percent: 0 }]);
  t.throws(() => parseRocmSmiJson('{"system": {"Driver version": "6.3.6"}}'), /no card/);
  t.throws(() => parseRocmSmiJson('WARNING: AMD GPU device(s) is/are in a low-power state'));
});

t.test('rocm-smi --json: key casing drift and temperatures', async (t) => {
  const [d] = parseRocmSmiJson(
    JSON.stringify({
      card1: {
        'Card series': 'Instinct MI210',
        'VRAM Total Memory (B)': '68702699520',
        'VRAM Total Used Memory (B)': '11534336',
        'Temperature (Sensor edge) (C)': '41.0',
        'GPU use (%)': '7',
      },
    }),
  );
  t.same(d, { index: 1, name: 'Instinct MI210', vram_total_mb: 65520, vram_used_mb: 11, temp_c: 41, utilization_percent: 7 });
});

t.test('amd-smi --json: value/unit objects, hotspot when edge is N/A, names from static', async (t) => {
  const devices = parseAmdSmiJson(await text('amd/amd-smi-metric-rx7800xt.json'), await text('amd/amd-smi-static-rx7800xt.json'));
  t.same(devices, [{ index: 0, name: 'AMD Radeon RX 7800 XT', vram_total_mb: 16368, vram_used_mb: 14569, temp_c: 41, utilization_percent: 2 }]);
  const bare = parseAmdSmiJson(JSON.stringify(JSON.parse(await text('amd/amd-smi-metric-rx7800xt.json')).gpu_data));
  t.equal(bare[0]?.name, 'AMD GPU 0', 'a bare array works too, with a generic name without static');
});

t.test('amdgpu sysfs: only vendor 0x1002 cards, bytes and millidegrees', async (t) => {
  const cards = await readAmdSysfs(hostFixture('amdgpu-sysfs'));
  t.equal(cards.length, 1, 'the Intel card1 is skipped');
  t.same(parseAmdSysfs(cards), [{ index: 0, name: 'AMD GPU 0', vram_total_mb: 16368, vram_used_mb: 660, temp_c: 47, utilization_percent: 3 }]);
  t.same(await readAmdSysfs('/nonexistent'), []);
});

t.test('vulkaninfo: Mesa lavapipe is a CPU-type device of 2 GiB, reported only when named', async (t) => {
  const devices = parseVulkaninfo(await text('vulkan/lavapipe.txt'));
  const lavapipe = {
    index: 0,
    name: 'llvmpipe (LLVM 15.0.6, 256 bits)',
    vendor: 'mesa',
    type: 'cpu',
    vram_total_mb: 2048,
    vram_used_mb: 0,
    temp_c: null,
    utilization_percent: null,
  };
  t.same(devices, [lavapipe], 'no budget extension: nothing counted as used');
  t.same(visibleVulkanDevices(devices, undefined), [], 'a CPU device is not a GPU unless GGML_VK_VISIBLE_DEVICES names it');
  t.same(visibleVulkanDevices(devices, '0'), [lavapipe]);
  t.same(visibleVulkanDevices(devices, '1'), []);
});

t.test('vulkaninfo: a discrete card is its largest device-local heap, used = size - (budget - usage)', async (t) => {
  const devices = parseVulkaninfo(await text('vulkan/discrete-and-lavapipe.txt'));
  t.same(
    devices.map((d) => [d.index, d.vendor, d.type, d.vram_total_mb, d.vram_used_mb]),
    [
      [0, 'nvidia', 'discrete', 24564, 2144],
      [1, 'mesa', 'cpu', 2048, 0],
    ],
  );
  t.equal(devices[0]?.name, 'NVIDIA GeForce RTX 4090');
  t.same(
    visibleVulkanDevices(devices, undefined).map((d) => d.index),
    [0],
    'without the variable: every device but the CPU one',
  );
  t.same(
    visibleVulkanDevices(devices, '1, 0').map((d) => d.index),
    [0, 1],
  );
});

t.test('vulkaninfo: a loader error or garbage is rejected', async (t) => {
  t.throws(() => parseVulkaninfo('ERROR: [Loader Message] Code 0 : vkCreateInstance: Found no drivers!\n'), /unexpected vulkaninfo output/);
  t.throws(() => parseVulkaninfo('Device Properties and Extensions:\n=====\n'), /no GPU block/);
  t.throws(() => parseVulkaninfo('Device Properties and Extensions:\nGPU0:\nvendorID = 0x10de\n'), /no deviceName/);
});
