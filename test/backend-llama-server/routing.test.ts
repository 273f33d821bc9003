/**
 * The backends registry's routing with a backend that runs a format with another's handler (as
 * backend-llama-server runs GGUF): it conflicts with nobody, a model that needs `vision` goes to
 * it, a reranker goes to it while it is available (it prefers `rerank`), and the `backends`
 * configuration chooses it per format or per model.
 */
import t from 'tap';
import { ConfigError } from '../../core/config/load.js';
import type { FormatHandler, InferenceBackend } from 'lia/engine';
import { BackendRegistry } from '../../plugins/engine/backend-registry.js';

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

function registry(withServer = true, available: () => Promise<boolean> = async () => true): BackendRegistry {
  const r = new BackendRegistry();
  r.register(backend('llama-cpp', { formats: [gguf] }), 'backend-llama-cpp');
  if (withServer) {
    r.register(backend('llama-server', { runs: ['gguf'], capabilities: ['vision'], prefers: ['rerank'], available }), 'backend-llama-server');
  }
  return r;
}

const text = { name: 'stories:latest', format: 'gguf', capabilities: ['completion'] as const };
const vision = { name: 'llava:latest', format: 'gguf', capabilities: ['completion', 'vision'] as const };
const reranker = { name: 'bge-reranker:latest', format: 'gguf', capabilities: ['rerank' as const] };

t.test('no conflict: the format keeps its backend, a vision model goes to the one that declares vision', async (t) => {
  const r = registry();
  r.configure({}, 'test');
  t.equal((await r.forModel({ ...text, capabilities: [...text.capabilities] })).name, 'llama-cpp');
  t.equal((await r.forModel({ ...vision, capabilities: [...vision.capabilities] })).name, 'llama-server');
  t.equal(r.handler('gguf'), gguf, 'the handler is the one that reads the files');
});

t.test('without a backend that takes images, a vision model stays on its format backend', async (t) => {
  const r = registry(false);
  r.configure({}, 'test');
  t.equal((await r.forModel({ ...vision, capabilities: [...vision.capabilities] })).name, 'llama-cpp');
});

t.test('backends chooses per format (backend or plugin name) and per model', async (t) => {
  const byFormat = registry();
  byFormat.configure({ gguf: 'backend-llama-server' }, 'test');
  t.equal((await byFormat.forModel({ ...text, capabilities: [...text.capabilities] })).name, 'llama-server');
  t.equal(byFormat.forFormat('gguf').name, 'llama-server');
  t.equal(byFormat.handler('gguf'), gguf, 'with the handler of the backend that declares the format');

  const byModel = registry();
  byModel.configure({ 'stories:latest': 'llama-server' }, 'test');
  t.equal((await byModel.forModel({ ...text, capabilities: [...text.capabilities] })).name, 'llama-server');
  t.equal((await byModel.forModel({ ...text, name: 'other:latest', capabilities: [...text.capabilities] })).name, 'llama-cpp', 'other models keep the default');

  const back = registry();
  back.configure({ 'llava:latest': 'llama-cpp' }, 'test');
  t.equal((await back.forModel({ ...vision, capabilities: [...vision.capabilities] })).name, 'llama-cpp', 'a model choice wins over the capability');
});

t.test('a choice naming no enabled backend stops the start', async (t) => {
  t.throws(() => registry().configure({ 'stories:latest': 'vllm' }, 'test'), ConfigError);
  t.throws(() => registry(false).configure({ gguf: 'llama-server' }, 'test'), ConfigError);
});

t.test('a reranker goes to the backend that prefers rerank while it is available, asked at each lookup', async (t) => {
  let built = false;
  let asked = 0;
  const r = registry(true, async () => {
    asked++;
    return built;
  });
  r.configure({}, 'test');
  t.equal((await r.forModel(reranker)).name, 'llama-cpp', 'not available: the format backend ranks');
  built = true;
  t.equal((await r.forModel(reranker)).name, 'llama-server', 'available: the backend that prefers it');
  t.equal(asked, 2, 'availability is asked each time');
  t.equal((await r.forModel({ ...text, capabilities: [...text.capabilities] })).name, 'llama-cpp', 'a text model stays');
  t.equal(asked, 2, 'and is not asked for a model without the capability');

  const failing = registry(true, async () => {
    throw new Error('no binary');
  });
  failing.configure({}, 'test');
  t.equal((await failing.forModel(reranker)).name, 'llama-cpp', 'an availability check that fails counts as not available');

  const plain = new BackendRegistry();
  plain.register(backend('llama-cpp', { formats: [gguf] }), 'test');
  plain.register(backend('other', { runs: ['gguf'], prefers: ['rerank'] }), 'test');
  plain.configure({}, 'test');
  t.equal((await plain.forModel(reranker)).name, 'other', 'a backend without available() counts as available');
});

t.test('a backends entry for the model or its format overrides the preference', async (t) => {
  const byModel = registry();
  byModel.configure({ 'bge-reranker:latest': 'llama-cpp' }, 'test');
  t.equal((await byModel.forModel(reranker)).name, 'llama-cpp', 'a model entry');
  const byFormat = registry();
  byFormat.configure({ gguf: 'backend-llama-cpp' }, 'test');
  t.equal((await byFormat.forModel(reranker)).name, 'llama-cpp', 'a format entry naming the default');
  const toServer = registry(true, async () => false);
  toServer.configure({ 'bge-reranker:latest': 'llama-server' }, 'test');
  t.equal((await toServer.forModel(reranker)).name, 'llama-server', 'a model entry is kept even when the backend is not available (its load says why)');
});

t.test('a format added on its own (the gguf plugin) is served by a backend that runs it when none declares it', async (t) => {
  const alone = new BackendRegistry();
  alone.addFormat(gguf);
  alone.register(backend('llama-server', { runs: ['gguf'], capabilities: ['vision'] }), 'backend-llama-server');
  alone.configure({}, 'test');
  t.equal(alone.forFormat('gguf').name, 'llama-server', 'node-llama-cpp disabled: llama-server is the format backend');
  t.equal(alone.handler('gguf'), gguf, 'with the added handler');
  t.equal((await alone.forModel({ ...text, capabilities: [...text.capabilities] })).name, 'llama-server');

  const chosen = new BackendRegistry();
  chosen.addFormat(gguf);
  chosen.register(backend('llama-server', { runs: ['gguf'] }), 'backend-llama-server');
  chosen.configure({ gguf: 'llama-server' }, 'test');
  t.equal(chosen.forFormat('gguf').name, 'llama-server', 'a backends entry naming it is met');

  const both = registry();
  both.addFormat(gguf);
  both.configure({}, 'test');
  t.equal(both.forFormat('gguf').name, 'llama-cpp', 'a backend that declares the format keeps it');

  const nobody = new BackendRegistry();
  nobody.addFormat(gguf);
  nobody.configure({}, 'test');
  t.throws(() => nobody.forFormat('gguf'), /no enabled inference backend runs models in the "gguf" format/, 'no backend runs it: not served');
  t.throws(() => nobody.addFormat(gguf), /added twice/);
});
