/**
 * Deeply nested JSON schemas: turned into a grammar by recursive code in the runner, a schema
 * nested 2,000 levels deep would overflow the runner's stack and end every generation on it. Each
 * surface refuses it with a 400 in its own format, naming the field and the limit, while another
 * client's stream on the same model runs to its end.
 */
import t from 'tap';
import { createModel } from '../helpers/models.js';
import { ndjson, startEngineAppliance } from '../engine/helpers.js';

const app = await startEngineAppliance({ plugins: { 'api-openai': {} } });
t.teardown(() => app.close());
await createModel(app, 'chatml', 'gguf/stories260K-chatml.gguf');

/** A schema of `depth` nested objects: {"type":"object","properties":{"a":{...}}}. */
function nested(depth: number): Record<string, unknown> {
  let schema: Record<string, unknown> = { type: 'string' };
  for (let i = 0; i < depth; i++) schema = { type: 'object', properties: { a: schema } };
  return schema;
}

const deep = nested(1000); // 2,001 levels of JSON
const hi = [{ role: 'user', content: 'Tell me a story.' }];
const post = (path: string, body: unknown) => app.fetch(path, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });

t.test('a schema nested 2,000 levels deep is a 400 on every surface; a stream beside it finishes', async (t) => {
  // A stream on the same model, under way while the hostile requests arrive.
  const streaming = post('/api/generate', { model: 'chatml', prompt: 'Once upon a time', options: { num_predict: 48 } }).then(ndjson);

  const native: Array<[string, Record<string, unknown>, string]> = [
    ['/api/generate', { model: 'chatml', prompt: 'hi', format: deep }, 'format'],
    ['/api/chat', { model: 'chatml', messages: hi, format: deep }, 'format'],
    ['/api/chat', { model: 'chatml', messages: hi, tools: [{ type: 'function', function: { name: 'f', parameters: deep } }] }, 'tools[0].function.parameters'],
  ];
  for (const [path, body, field] of native) {
    const res = await post(path, body);
    t.equal(res.status, 400, `${path} ${field}`);
    const err = (await res.json()) as { error: string };
    t.equal(typeof err.error, 'string', 'Ollama error format');
    t.match(err.error, `${field} is nested too deeply`);
    t.match(err.error, 'at most 64 levels');
  }

  const openai: Array<[Record<string, unknown>, string]> = [
    [{ response_format: { type: 'json_schema', json_schema: { name: 's', schema: deep } } }, 'response_format.json_schema.schema'],
    [{ tools: [{ type: 'function', function: { name: 'f', parameters: deep } }] }, 'tools[0].function.parameters'],
  ];
  for (const [extra, field] of openai) {
    const res = await post('/v1/chat/completions', { model: 'chatml', messages: hi, ...extra });
    t.equal(res.status, 400, field);
    t.match(await res.json(), { error: { type: 'invalid_request_error', param: field, message: /nested too deeply: a schema may nest at most 64 levels/ } });
  }

  // Too many values is refused too, and a schema of ordinary depth still works.
  const wide = { type: 'object', properties: Object.fromEntries(Array.from({ length: 6000 }, (_, i) => [`p${i}`, { type: 'string' }])) };
  const big = await post('/api/generate', { model: 'chatml', prompt: 'hi', format: wide });
  t.equal(big.status, 400);
  t.match(await big.json(), { error: /format is too large: a schema may hold at most 10000 values/ });
  const ok = await post('/api/generate', { model: 'chatml', prompt: 'hi', format: nested(3), stream: false, options: { num_predict: 4 } });
  t.equal(ok.status, 200, 'a shallow schema is accepted');

  const lines = await streaming;
  t.match(lines.at(-1), { done: true, eval_count: 48 }, 'the concurrent stream finished');
});
