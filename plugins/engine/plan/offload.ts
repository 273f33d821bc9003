/**
 * Where a model runs, decided once per load for every engine: which GPU, and how many of its
 * layers go there. The engine asks this before it loads; each backend only carries the answer out
 * (llama-server's `--device` and `-ngl`, node-llama-cpp's `gpuLayers`).
 *
 * The rule is Ollama's: a model goes to the device with the most room, and as many of its layers
 * as that room holds with their share of the KV cache, after the device's fixed cost (the compute
 * buffer); the output layer counts as one more layer, offloaded last, as llama.cpp counts it. A
 * model that does not fit whole is split between the GPU and the CPU; one for which not a single
 * layer fits runs on the CPU. A model that no single device holds whole, on a machine with several,
 * is spread over them as Ollama does: the devices with the most room first, each taking the layers
 * its room holds (each paying the fixed cost), the output layer on the last, until the model is
 * placed or the devices are full; what remains runs on the CPU. `num_gpu` (Ollama's option and Modelfile parameter) sets the count
 * instead: 0 keeps the model on the CPU, a larger count is taken as asked (at most every layer),
 * even past what the room holds, as Ollama does (the load then fails where the driver refuses).
 *
 * The room of a device is what it reports free, less a reserve for the driver's own allocations,
 * and at most what the configured cap leaves LIA on it.
 *
 * @module
 */
import type { DeviceShare, LayerCosts, Offload } from '../contracts/backend.js';

export type { DeviceShare, LayerCosts, Offload };

/** A device an engine can place layers on. */
export interface DeviceRoom {
  /** The engine's device name (`Vulkan0`, `CUDA1`). */
  id: string;
  /** Bytes the device reports free now. */
  freeBytes: number;
  /** Bytes LIA's loaded models already hold on it (counted against the cap). */
  usedByLiaBytes: number;
}

export interface OffloadOptions {
  /** `num_gpu`: layers to offload, or undefined for automatic. */
  numGpu?: number;
  /** At most this many bytes of each device for LIA's models; undefined: no cap. */
  capBytes?: number;
  /** Bytes of each device left to the driver and other programs. */
  reserveBytes: number;
}

export const ON_CPU: Offload = Object.freeze({ device: null, gpuLayers: 0, vramBytes: 0 });

/** Bytes `n` offloaded layers take on a device (the output layer is the last one). */
export function offloadBytes(costs: LayerCosts, n: number): number {
  if (n <= 0) return 0;
  const repeating = Math.min(n, costs.layers);
  return costs.fixedBytes + repeating * costs.bytesPerLayer + (n > costs.layers ? costs.outputBytes : 0);
}

/** The most layers that fit in `room` bytes. */
function layersThatFit(costs: LayerCosts, room: number): number {
  if (room <= costs.fixedBytes) return 0;
  if (offloadBytes(costs, costs.layers + 1) <= room) return costs.layers + 1;
  return Math.max(0, Math.min(costs.layers, Math.floor((room - costs.fixedBytes) / Math.max(1, costs.bytesPerLayer))));
}

function room(device: DeviceRoom, options: OffloadOptions): number {
  const free = device.freeBytes - options.reserveBytes;
  const capped = options.capBytes === undefined ? free : Math.min(free, options.capBytes - device.usedByLiaBytes);
  return Math.max(0, capped);
}

/** Decides where a model runs; see the module comment. */
export function planOffload(costs: LayerCosts, devices: readonly DeviceRoom[], options: OffloadOptions): Offload {
  if (devices.length === 0 || options.numGpu === 0) return ON_CPU;
  const byRoom = [...devices].sort((a, b) => room(b, options) - room(a, options));
  const best = byRoom[0]!;
  const whole = costs.layers + 1;
  const asked = options.numGpu !== undefined && options.numGpu > 0;
  const gpuLayers = asked ? Math.min(options.numGpu!, whole) : layersThatFit(costs, room(best, options));
  if (!asked && gpuLayers < whole && byRoom.length > 1) {
    const split = spread(costs, byRoom, options);
    if (split.length > 1) return joined(split);
  }
  if (gpuLayers === 0) return ON_CPU;
  return { device: best.id, gpuLayers, vramBytes: offloadBytes(costs, gpuLayers) };
}

/** The shares of devices (most room first) that together hold as much of the model as they can. */
function spread(costs: LayerCosts, byRoom: readonly DeviceRoom[], options: OffloadOptions): DeviceShare[] {
  const shares: DeviceShare[] = [];
  let left = costs.layers;
  for (const device of byRoom) {
    if (left === 0) break;
    const space = room(device, options) - costs.fixedBytes;
    const layers = Math.min(left, Math.max(0, Math.floor(space / Math.max(1, costs.bytesPerLayer))));
    if (layers === 0) continue;
    left -= layers;
    const withOutput = left === 0 && space - layers * costs.bytesPerLayer >= costs.outputBytes;
    const gpuLayers = layers + (withOutput ? 1 : 0);
    shares.push({ device: device.id, gpuLayers, vramBytes: costs.fixedBytes + layers * costs.bytesPerLayer + (withOutput ? costs.outputBytes : 0) });
  }
  return shares;
}

function joined(split: DeviceShare[]): Offload {
  return {
    device: split[0]!.device,
    gpuLayers: split.reduce((sum, s) => sum + s.gpuLayers, 0),
    vramBytes: split.reduce((sum, s) => sum + s.vramBytes, 0),
    split,
  };
}

/** Bytes an offload holds on `device` (its share when split). */
export function bytesOn(offload: Offload | null | undefined, device: string): number {
  if (!offload) return 0;
  if (offload.split) return offload.split.find((s) => s.device === device)?.vramBytes ?? 0;
  return offload.device === device ? offload.vramBytes : 0;
}

/** The devices an offload uses. */
export function devicesOf(offload: Offload | null | undefined): string[] {
  if (!offload?.device) return [];
  return offload.split ? offload.split.map((s) => s.device) : [offload.device];
}
