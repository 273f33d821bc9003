/**
 * The shared setup of the rerank and token tests: a real appliance with the built reranker
 * fixtures (`npm run fixtures`, built here on first use) and shared text models created through
 * the store's HTTPS API.
 *
 * @module
 */
import { builtFixture } from '../../scripts/fixtures/build.js';
import { startTestAppliance, type TestAppliance } from '../helpers/appliance.js';
import { createModel } from '../helpers/models.js';

/** Paths of the built fixtures. */
export async function rerankFixtures(): Promise<{ gguf: string; onnx: string }> {
  return { gguf: await builtFixture('tiny-reranker.gguf'), onnx: await builtFixture('tiny-cross-encoder') };
}

/**
 * An appliance with `reranker` (GGUF), `cross` (ONNX cross-encoder), `stories` (a GGUF text
 * model) and `minilm` (an ONNX embedding model).
 */
export async function rerankAppliance(): Promise<TestAppliance & { fixtures: { gguf: string; onnx: string } }> {
  const fixtures = await rerankFixtures();
  const app = await startTestAppliance({ plugins: { 'host-network': false, 'host-gpu': false, 'host-services': false, webui: false } });
  try {
    await createModel(app, 'reranker', fixtures.gguf);
    await createModel(app, 'cross', fixtures.onnx);
    await createModel(app, 'stories', 'gguf/stories260K.gguf');
    await createModel(app, 'minilm', 'onnx/tiny-random-minilm');
  } catch (err) {
    await app.close();
    throw err;
  }
  return Object.assign(app, { fixtures });
}

/** POSTs JSON; the status and the parsed body (text when it is not JSON). */
export async function post(
  app: Pick<TestAppliance, 'fetch'>,
  pathname: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: any }> {
  const res = await app.fetch(pathname, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  const text = await res.text();
  try {
    return { status: res.status, json: JSON.parse(text) };
  } catch {
    return { status: res.status, json: text };
  }
}
