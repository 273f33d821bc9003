/**
 * llama-server's GPU back ends: node-llama-cpp's Vulkan prebuilt (a dependency) is found as a
 * library of the bundled llama.cpp release, a library of another release is not, and
 * `--list-devices` output is read per back end.
 */
import { cp, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { backendEnv, findGpuBackend, parseDeviceList } from '../../plugins/backend-llama-server/devices.js';

// What LIA's llama-server printed with node-llama-cpp's Vulkan library loaded and
// GGML_VK_VISIBLE_DEVICES=0 on the build machine (Mesa lavapipe), plus a CUDA line of the same form.
const LISTED = `0.00.000.431 I srv  llama_server: initializing ...
Available devices:
  Vulkan0: llvmpipe (LLVM 15.0.6, 256 bits) (2048 MiB, 2048 MiB free)
  CUDA0: NVIDIA H200 (143167 MiB, 142577 MiB free)
`;

t.test('--list-devices is read per back end, sizes in bytes', async (t) => {
  t.same(parseDeviceList(LISTED, 'vulkan'), [
    { id: 'Vulkan0', kind: 'vulkan', name: 'llvmpipe (LLVM 15.0.6, 256 bits)', totalBytes: 2048 * 2 ** 20, freeBytes: 2048 * 2 ** 20 },
  ]);
  t.same(
    parseDeviceList(LISTED, 'cuda').map((d) => [d.id, d.name, d.freeBytes / 2 ** 20]),
    [['CUDA0', 'NVIDIA H200', 142577]],
  );
  t.same(parseDeviceList('Available devices:\n', 'vulkan'), [], 'no device');
  t.same(parseDeviceList('error while loading shared libraries\n', 'vulkan'), []);
});

t.test("node-llama-cpp's Vulkan prebuilt is found and loaded through GGML_BACKEND_PATH", async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'lia-devices-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const binary = path.join(dir, 'llama-server');
  await writeFile(binary, '');
  const vulkan = findGpuBackend('vulkan', binary);
  t.ok(vulkan, 'npm install brought @node-llama-cpp/linux-x64-vulkan');
  t.equal(vulkan?.source, 'node-llama-cpp');
  t.match(vulkan?.library, /linux-x64-vulkan\/bins\/linux-x64-vulkan\/libggml-vulkan\.so$/);
  t.same(backendEnv(vulkan), { GGML_BACKEND_PATH: vulkan?.library });
  t.equal(findGpuBackend('cuda', binary), null, 'no CUDA prebuilt is installed');

  // A build that made its own Vulkan library: ggml loads it from beside the binary, no variable.
  await cp(vulkan!.library, path.join(dir, 'libggml-vulkan.so'));
  const own = findGpuBackend('vulkan', binary);
  t.same(own, { kind: 'vulkan', library: path.join(dir, 'libggml-vulkan.so'), source: 'build' });
  t.same(backendEnv(own), {});
  t.same(backendEnv(null), {});
});

t.test('a prebuilt of another llama.cpp release is not loaded (its ABI may differ)', async (t) => {
  const modules = await mkdtemp(path.join(os.tmpdir(), 'lia-modules-'));
  t.teardown(() => rm(modules, { recursive: true, force: true }));
  const bins = path.join(modules, '@node-llama-cpp', 'linux-x64-vulkan', 'bins', 'linux-x64-vulkan');
  await mkdir(bins, { recursive: true });
  await mkdir(path.join(modules, 'node-llama-cpp', 'llama'), { recursive: true });
  await writeFile(path.join(bins, 'libggml-vulkan.so'), '');
  const release = (r: string) =>
    writeFile(path.join(bins, '_nlcBuildMetadata.json'), JSON.stringify({ buildOptions: { gpu: 'vulkan', llamaCpp: { release: r } } }));
  await writeFile(path.join(modules, 'node-llama-cpp', 'llama', 'binariesGithubRelease.json'), JSON.stringify({ release: 'v0.5.0' }));
  const binary = path.join(modules, 'llama-server');
  await release('v0.5.0');
  t.equal(findGpuBackend('vulkan', binary, modules)?.library, path.join(bins, 'libggml-vulkan.so'), 'same release: used');
  await release('v0.4.2');
  t.equal(findGpuBackend('vulkan', binary, modules), null, 'another release: not used');
});
