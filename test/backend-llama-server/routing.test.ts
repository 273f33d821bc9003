/**
 * The backends registry's routing with a backend that runs a format with another's handler (as
 * backend-llama-server runs GGUF): it conflicts with nobody, a model that needs `vision` goes to
 * it, and the `backends` configuration chooses it per format or per model.
 */
import t from 'tap';
import { ConfigError } from '../../core/config/load.js';
import type { FormatHandler, InferenceBackend } from '../../core/contracts/backend.js';
import { BackendRegistry } from '../../core/plugin/backend-registry.js';

const gguf = {
  name: 'gguf',
  mediaTypes: ['application/vnd.ollama.image.model'],
  layout: 'file',
  files: 'one .gguf file',
  recognise: () => null,
  describe: async () => ({ details: {}, capabilities: [] }),
} as unknown as FormatHandler;
const backend = (name: string, extra: Partial<InferenceBackend> = {}): InferenceBackend =>
  ({ name, formats: [], estimateMemory: async () => ({ totalBytes: 0, vramBytes: 0 }), load: async () => ({}), ...extra }) as unknown as InferenceBackend;

function registry(withServer = true): BackendRegistry {
  const r = new BackendRegistry();
  r.register(backend('llama-cpp', { formats: [gguf] }));
  r.claim('backend-llama-cpp');
  if (withServer) {
    r.register(backend('llama-server', { runs: ['gguf'], capabilities: ['vision'] }));
    r.claim('backend-llama-server');
  }
  return r;
}

const text = { name: 'stories:latest', format: 'gguf', capabilities: ['completion'] as const };
const vision = { name: 'llava:latest', format: 'gguf', capabilities: ['completion', 'vision'] as const };

t.test('no conflict: the format keeps its backend, a vision model goes to the one that declares vision', async (t) => {
  const r = registry();
  r.configure({}, 'test');
  t.equal(r.forModel({ ...text, capabilities: [...text.capabilities] }).name, 'llama-cpp');
  t.equal(r.forModel({ ...vision, capabilities: [...vision.capabilities] }).name, 'llama-server');
  t.equal(r.handler('gguf'), gguf, 'the handler is the one that reads the files');
});

t.test('without a backend that takes images, a vision model stays on its format backend', async (t) => {
  const r = registry(false);
  r.configure({}, 'test');
  t.equal(r.forModel({ ...vision, capabilities: [...vision.capabilities] }).name, 'llama-cpp');
});

t.test('backends chooses per format (backend or plugin name) and per model', async (t) => {
  const byFormat = registry();
  byFormat.configure({ gguf: 'backend-llama-server' }, 'test');
  t.equal(byFormat.forModel({ ...text, capabilities: [...text.capabilities] }).name, 'llama-server');
  t.equal(byFormat.forFormat('gguf').name, 'llama-server');
  t.equal(byFormat.handler('gguf'), gguf, 'with the handler of the backend that declares the format');

  const byModel = registry();
  byModel.configure({ 'stories:latest': 'llama-server' }, 'test');
  t.equal(byModel.forModel({ ...text, capabilities: [...text.capabilities] }).name, 'llama-server');
  t.equal(byModel.forModel({ ...text, name: 'other:latest', capabilities: [...text.capabilities] }).name, 'llama-cpp', 'other models keep the default');

  const back = registry();
  back.configure({ 'llava:latest': 'llama-cpp' }, 'test');
  t.equal(back.forModel({ ...vision, capabilities: [...vision.capabilities] }).name, 'llama-cpp', 'a model choice wins over the capability');
});

t.test('a choice naming no enabled backend stops the start', async (t) => {
  t.throws(() => registry().configure({ 'stories:latest': 'vllm' }, 'test'), ConfigError);
  t.throws(() => registry(false).configure({ gguf: 'llama-server' }, 'test'), ConfigError);
});
