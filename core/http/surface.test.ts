import t from 'tap';
import { normalizePath, surfaceOf } from './surface.js';

t.test('normalizePath undoes every spelling trick', async (t) => {
  const cases: [string, string][] = [
    ['/api/tags', '/api/tags'],
    ['//api//tags', '/api/tags'],
    ['/api/./tags', '/api/tags'],
    ['/api/x/../tags', '/api/tags'],
    ['/health/../system/status', '/system/status'],
    ['/API/Tags/', '/api/tags'],
    ['/api/tags?x=1#frag', '/api/tags'],
    ['/api%2Ftags', '/api/tags'],
    ['/api/%2e%2e/system/status', '/system/status'],
    ['/api/%252e%252e/system/status', '/system/status'],
    ['/v1\\models', '/v1/models'],
    ['/../../etc/passwd', '/etc/passwd'],
    ['/%zz', '/%zz'],
  ];
  for (const [raw, want] of cases) t.equal(normalizePath(raw), want, raw);
});

t.test('surfaceOf picks the error format', async (t) => {
  t.equal(surfaceOf('/v1/chat/completions'), 'openai');
  t.equal(surfaceOf('//V1/models'), 'openai');
  t.equal(surfaceOf('/api/chat'), 'ollama');
  t.equal(surfaceOf('/system/status'), 'system');
  t.equal(surfaceOf('/v10/x'), 'other');
  t.equal(surfaceOf('/health'), 'other');
});
