/**
 * The offload plan (plugins/engine/plan/offload.ts): which device and how many layers, as Ollama
 * fits them: the device with the most room, every layer that fits with its KV cache, the output
 * layer last, `num_gpu` as asked, the cap and the reserve counted.
 */
import t from 'tap';
import { bytesOn, devicesOf, offloadBytes, planOffload, type LayerCosts } from '../../plugins/engine/plan/offload.js';

const MiB = 2 ** 20;
// 30 layers of 10 MiB, a 20 MiB output layer, 50 MiB of compute buffers: 370 MiB whole.
const costs: LayerCosts = { layers: 30, bytesPerLayer: 10 * MiB, outputBytes: 20 * MiB, fixedBytes: 50 * MiB };
const device = (id: string, freeMiB: number, usedByLiaMiB = 0) => ({ id, freeBytes: freeMiB * MiB, usedByLiaBytes: usedByLiaMiB * MiB });
const none = { reserveBytes: 0 };

t.test('a model that fits goes whole, output layer included, to the device with the most room', async (t) => {
  const plan = planOffload(costs, [device('Vulkan0', 400), device('Vulkan1', 2000)], none);
  t.same(plan, { device: 'Vulkan1', gpuLayers: 31, vramBytes: 370 * MiB });
  t.equal(offloadBytes(costs, 31), 370 * MiB);
});

t.test('a model larger than the room is split: the layers that fit, the rest on the CPU', async (t) => {
  t.same(planOffload(costs, [device('Vulkan0', 200)], none), { device: 'Vulkan0', gpuLayers: 15, vramBytes: 200 * MiB });
  t.same(planOffload(costs, [device('Vulkan0', 365)], none).gpuLayers, 30, 'every layer but the output one');
});

t.test('no room for one layer, no device, or num_gpu 0: the CPU', async (t) => {
  const cpu = { device: null, gpuLayers: 0, vramBytes: 0 };
  t.same(planOffload(costs, [device('Vulkan0', 55)], none), cpu);
  t.same(planOffload(costs, [], none), cpu);
  t.same(planOffload(costs, [device('Vulkan0', 2000)], { ...none, numGpu: 0 }), cpu);
});

t.test('num_gpu is taken as asked, at most the whole model; a negative one is automatic', async (t) => {
  t.same(planOffload(costs, [device('Vulkan0', 2000)], { ...none, numGpu: 10 }), { device: 'Vulkan0', gpuLayers: 10, vramBytes: 150 * MiB });
  t.equal(planOffload(costs, [device('Vulkan0', 100)], { ...none, numGpu: 20 }).gpuLayers, 20, 'past the room, as Ollama does');
  t.equal(planOffload(costs, [device('Vulkan0', 2000)], { ...none, numGpu: 999 }).gpuLayers, 31);
  t.equal(planOffload(costs, [device('Vulkan0', 2000)], { ...none, numGpu: -1 }).gpuLayers, 31);
});

t.test('the reserve and the cap shrink the room; the cap counts what LIA already holds there', async (t) => {
  t.equal(planOffload(costs, [device('Vulkan0', 400)], { reserveBytes: 100 * MiB }).gpuLayers, 25);
  t.equal(planOffload(costs, [device('Vulkan0', 4000)], { reserveBytes: 0, capBytes: 250 * MiB }).gpuLayers, 20);
  t.equal(planOffload(costs, [device('Vulkan0', 4000, 150)], { reserveBytes: 0, capBytes: 250 * MiB }).gpuLayers, 5);
  t.equal(planOffload(costs, [device('Vulkan0', 4000, 250)], { reserveBytes: 0, capBytes: 250 * MiB }).device, null, 'the cap is used up');
});

t.test('a model no single device holds is spread over several, most room first, the output layer on the last', async (t) => {
  // 370 MiB whole; 250 MiB free on one, 200 MiB on the other: 20 layers (250 MiB), then 10 layers
  // and the output layer (170 MiB).
  const plan = planOffload(costs, [device('Vulkan0', 200), device('Vulkan1', 250)], none);
  t.same(plan, {
    device: 'Vulkan1',
    gpuLayers: 31,
    vramBytes: 420 * MiB,
    split: [
      { device: 'Vulkan1', gpuLayers: 20, vramBytes: 250 * MiB },
      { device: 'Vulkan0', gpuLayers: 11, vramBytes: 170 * MiB },
    ],
  });
  t.same(bytesOn(plan, 'Vulkan0'), 170 * MiB, 'each device counts its share');
  t.same(devicesOf(plan), ['Vulkan1', 'Vulkan0']);
});

t.test('spread and still short: the rest on the CPU; one device that holds it whole is not split', async (t) => {
  const short = planOffload(costs, [device('Vulkan0', 100), device('Vulkan1', 150)], none);
  t.same(
    short.split?.map((s) => s.gpuLayers),
    [10, 5],
    '15 of 30 layers, no output layer',
  );
  t.equal(short.gpuLayers, 15);
  t.notOk(planOffload(costs, [device('Vulkan0', 100), device('Vulkan1', 2000)], none).split, 'whole on the larger');
  t.notOk(planOffload(costs, [device('Vulkan0', 200), device('Vulkan1', 250)], { ...none, numGpu: 25 }).split, 'num_gpu places on one device, as asked');
});
