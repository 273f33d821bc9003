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
 * Mesa's lavapipe unless `GGML_VK_VISIBLE_DEVICES` names them). Both answers are kept for the life
 * of the process: the hardware does not change under a running appliance.
 *
 * @module
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
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

const listed = new Map<string, Promise<ComputeDevice[]>>();

/**
 * The devices llama-server sees with `backend` loaded (empty when it sees none or fails to list
 * them), asked once per binary, back end and device filter.
 */
export function listDevices(binary: string, backend: GpuBackend, env: NodeJS.ProcessEnv = process.env): Promise<ComputeDevice[]> {
  const key = `${binary}\0${backend.library}\0${env.GGML_VK_VISIBLE_DEVICES ?? ''}\0${env.CUDA_VISIBLE_DEVICES ?? ''}`;
  let devices = listed.get(key);
  if (!devices) {
    devices = run(binary, ['--list-devices'], {
      cwd: path.dirname(binary),
      env: { ...env, ...backendEnv(backend) },
      timeout: 30_000,
      maxBuffer: 1024 * 1024,
    }).then(
      ({ stdout, stderr }) => parseDeviceList(`${stdout}\n${stderr}`, backend.kind),
      () => [],
    );
    listed.set(key, devices);
  }
  return devices;
}
