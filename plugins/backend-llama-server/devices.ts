/**
 * The GPU back ends llama-server can run on, and the devices each one sees.
 *
 * LIA builds llama-server with `GGML_BACKEND_DL`: every ggml back end is a library loaded at start,
 * the CPU variants beside the binary. A GPU back end comes from one of two places, first found
 * first:
 * - beside the binary, when the build made one (`libggml-vulkan.so`, `libggml-cuda.so`), where ggml
 *   loads it by itself;
 * - node-llama-cpp's prebuilt of the same llama.cpp release (`@node-llama-cpp/linux-x64-vulkan`, a
 *   dependency of LIA, or `@node-llama-cpp/linux-x64-cuda` where it is installed), which ships each
 *   back end as the same kind of library; ggml loads one such out-of-tree library named by
 *   `GGML_BACKEND_PATH`. Its release is checked against the bundled source's, so a library of
 *   another release (an ABI that may differ) is never loaded.
 *
 * The devices are what `llama-server --list-devices` prints with that back end loaded, so they are
 * exactly the ones a server started the same way uses (Vulkan leaves out CPU-type devices such as
 * Mesa's lavapipe unless `GGML_VK_VISIBLE_DEVICES` names them), with what each has free now.
 *
 * @module
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { Errors } from 'lia/plugin';
import { projectPath } from 'lia/utils';

const run = promisify(execFile);

/** The GPU back ends LIA knows how to find, best first. */
export const GPU_BACKENDS = ['cuda', 'vulkan'] as const;
export type GpuBackendKind = (typeof GPU_BACKENDS)[number];

/** A GPU back-end library llama-server can load. */
export interface GpuBackend {
  kind: GpuBackendKind;
  /** The library file. */
  library: string;
  /** `build`: beside the binary (loaded by ggml itself); `node-llama-cpp`: its prebuilt, loaded through `GGML_BACKEND_PATH`. */
  source: 'build' | 'node-llama-cpp';
}

/** One device as llama-server lists it. */
export interface ComputeDevice {
  /** ggml's device name, what `--device` takes: `Vulkan0`, `CUDA1`. */
  id: string;
  kind: GpuBackendKind;
  /** The device's own name (`NVIDIA H200`, `llvmpipe (LLVM 15.0.6, 256 bits)`). */
  name: string;
  totalBytes: number;
  freeBytes: number;
}

/** The npm package of node-llama-cpp's prebuilt for a back end on this platform. */
export function prebuiltPackage(kind: GpuBackendKind): string {
  return `@node-llama-cpp/${process.platform}-${process.arch}-${kind}`;
}

/** What to install to get a back end, for the error that says it is missing. */
export function howToGet(kind: GpuBackendKind): string {
  return kind === 'vulkan'
    ? `reinstall LIA's dependencies (npm install brings ${prebuiltPackage('vulkan')})`
    : `npm install ${prebuiltPackage('cuda')} ${prebuiltPackage('cuda')}-ext beside LIA, or build llama-server with CUDA (nvcc and cuBLAS)`;
}

/** The llama.cpp release node-llama-cpp's own binaries and its source bundle are of. */
function bundledRelease(modules: string): string | null {
  try {
    return (
      (JSON.parse(readFileSync(path.join(modules, 'node-llama-cpp', 'llama', 'binariesGithubRelease.json'), 'utf8')) as { release?: string }).release ?? null
    );
  } catch {
    return null;
  }
}

function prebuiltLibrary(kind: GpuBackendKind, modules: string): string | null {
  const dir = path.join(modules, ...prebuiltPackage(kind).split('/'), 'bins', `${process.platform}-${process.arch}-${kind}`);
  const library = path.join(dir, `libggml-${kind}.so`);
  if (!existsSync(library)) return null;
  try {
    const meta = JSON.parse(readFileSync(path.join(dir, '_nlcBuildMetadata.json'), 'utf8')) as { buildOptions?: { llamaCpp?: { release?: string } } };
    const release = meta.buildOptions?.llamaCpp?.release;
    return release !== undefined && release === bundledRelease(modules) ? library : null;
  } catch {
    return null;
  }
}

/**
 * The library of a GPU back end for this binary, or null where there is none. `modules` is the
 * `node_modules` folder node-llama-cpp and its prebuilts are installed in (LIA's own).
 */
export function findGpuBackend(kind: GpuBackendKind, binary: string, modules: string = projectPath('node_modules')): GpuBackend | null {
  const beside = path.join(path.dirname(binary), `libggml-${kind}.so`);
  if (existsSync(beside)) return { kind, library: beside, source: 'build' };
  const prebuilt = prebuiltLibrary(kind, modules);
  return prebuilt ? { kind, library: prebuilt, source: 'node-llama-cpp' } : null;
}

/** The environment that makes llama-server load a back end (nothing for the CPU or one beside the binary). */
export function backendEnv(backend: GpuBackend | null): Record<string, string> {
  return backend?.source === 'node-llama-cpp' ? { GGML_BACKEND_PATH: backend.library } : {};
}

const MIB = 1024 * 1024;

/**
 * Parses `llama-server --list-devices`: `  Vulkan0: <name> (<total> MiB, <free> MiB free)` per
 * device under `Available devices:`; lines of other back ends (and the CPU, which is not listed)
 * are left out.
 */
export function parseDeviceList(text: string, kind: GpuBackendKind): ComputeDevice[] {
  const prefix = kind === 'cuda' ? 'CUDA' : 'Vulkan';
  const devices: ComputeDevice[] = [];
  for (const line of text.split('\n')) {
    const m = /^\s*([A-Za-z]+\d+):\s*(.+?)\s*\((\d+) MiB, (\d+) MiB free\)\s*$/.exec(line);
    if (!m || !m[1]!.startsWith(prefix)) continue;
    devices.push({ id: m[1]!, kind, name: m[2]!, totalBytes: Number(m[3]) * MIB, freeBytes: Number(m[4]) * MIB });
  }
  return devices;
}

/**
 * The devices llama-server sees with `backend` loaded, read anew at each call (what is free
 * changes as models load; a listing takes well under a second); empty when it sees none or fails
 * to list them.
 */
export async function listDevices(binary: string, backend: GpuBackend, env: NodeJS.ProcessEnv = process.env): Promise<ComputeDevice[]> {
  try {
    const { stdout, stderr } = await run(binary, ['--list-devices'], {
      cwd: path.dirname(binary),
      env: { ...env, ...backendEnv(backend) },
      timeout: 30_000,
      maxBuffer: 1024 * 1024,
    });
    return parseDeviceList(`${stdout}\n${stderr}`, backend.kind);
  } catch {
    return [];
  }
}

/** The plugin's `gpu` option: `auto` (the best back end with a device), `cpu`, or one back end. */
export type GpuMode = 'auto' | 'cpu' | GpuBackendKind;

const NO_DEVICE: Record<GpuBackendKind, string> = {
  vulkan:
    "install the GPU's Vulkan driver (Debian: mesa-vulkan-drivers for AMD and Intel, NVIDIA's own driver), or name a CPU device such as Mesa's lavapipe with GGML_VK_VISIBLE_DEVICES",
  cuda: "install NVIDIA's driver and check that nvidia-smi lists the GPU",
};

/**
 * Chooses the GPU back end servers load, once per binary. `auto` takes the first of
 * {@link GPU_BACKENDS} that is installed and sees a device, else the CPU; a named back end that is
 * missing, or sees no device, is an error that says what to install.
 */
export function gpuResolver(
  mode: GpuMode,
  onChoice: (chosen: GpuBackend | null, devices: ComputeDevice[]) => void = () => undefined,
): (binary: string) => Promise<GpuBackend | null> {
  const chosen = new Map<string, Promise<GpuBackend | null>>();
  const choose = async (binary: string): Promise<GpuBackend | null> => {
    if (mode === 'cpu') return null;
    for (const kind of mode === 'auto' ? GPU_BACKENDS : [mode]) {
      const backend = findGpuBackend(kind, binary);
      if (!backend) {
        if (mode === 'auto') continue;
        throw Errors.unavailable(`llama-server has no ${kind} back end (the gpu setting asks for it): ${howToGet(kind)}`);
      }
      const devices = await listDevices(binary, backend);
      if (devices.length > 0) {
        onChoice(backend, devices);
        return backend;
      }
      if (mode !== 'auto') throw Errors.unavailable(`llama-server's ${kind} back end sees no device (the gpu setting asks for it): ${NO_DEVICE[kind]}`);
    }
    onChoice(null, []);
    return null;
  };
  return (binary) => {
    let answer = chosen.get(binary);
    if (!answer) {
      answer = choose(binary);
      // A failure is not kept: the next load asks again (a driver installed meanwhile).
      answer.catch(() => chosen.delete(binary));
      chosen.set(binary, answer);
    }
    return answer;
  };
}
