import t from 'tap';
import { displayName, fullName, tryParseName } from '../../plugins/model-store/store/names.js';
import { StorePaths } from '../../plugins/model-store/store/paths.js';

t.test('names parse with Ollama defaults', async (t) => {
  const cases: Array<[string, string, string]> = [
    ['llama3.2', 'registry.ollama.ai/library/llama3.2:latest', 'llama3.2:latest'],
    ['smollm2:135m', 'registry.ollama.ai/library/smollm2:135m', 'smollm2:135m'],
    ['user/m:q4', 'registry.ollama.ai/user/m:q4', 'user/m:q4'],
    ['localhost:5000/ns/m', 'localhost:5000/ns/m:latest', 'localhost:5000/ns/m:latest'],
    ['127.0.0.1:5000/library/stories:latest', '127.0.0.1:5000/library/stories:latest', '127.0.0.1:5000/library/stories:latest'],
    ['http://host/ns/m:t', 'host/ns/m:t', 'host/ns/m:t'],
  ];
  for (const [raw, full, short] of cases) {
    const r = tryParseName(raw);
    if (!('name' in r)) {
      t.fail(`${raw}: ${r.problem}`);
      continue;
    }
    t.equal(fullName(r.name), full, raw);
    t.equal(displayName(r.name), short, raw);
  }
  const http = tryParseName('http://host/ns/m');
  t.equal('name' in http && http.name.scheme, 'http');
});

t.test('invalid names say why, and nothing escapes the store', async (t) => {
  const bad: Array<[string, RegExp]> = [
    ['', /empty/],
    ['../etc/passwd', /namespace|host/],
    ['..', /model/],
    ['a/../../b', /at most three parts/],
    ['/abs/path', /empty/],
    ['m:../x', /namespace/],
    ['m:..', /tag/],
    ['m\u0000x', /model/],
    ['modèle', /model/],
    ['m:', /tag is empty/],
    [':tag', /model is empty/],
    ['ns.with.dot/m', /namespace/],
    ['a'.repeat(81), /longer than 80/],
    ['h/n/m/x', /at most three parts/],
    ['m\\..\\x', /model/],
  ];
  const paths = new StorePaths('/tmp/store-root');
  for (const [raw, why] of bad) {
    const r = tryParseName(raw);
    t.ok('problem' in r, `${JSON.stringify(raw)} is invalid`);
    if ('problem' in r) t.match(r.problem, why, JSON.stringify(raw));
  }
  // Every valid name maps inside manifests/.
  for (const raw of ['a', 'h:1/n/m:t', '_x/_y:_z']) {
    const r = tryParseName(raw);
    if ('name' in r) t.ok(paths.manifest(r.name).startsWith('/tmp/store-root/manifests/'), raw);
  }
});
