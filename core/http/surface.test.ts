import t from 'tap';
import { Registry, type ErrorFormat } from '../plugin/hooks.js';
import { errorFormatFor } from './error-handler.js';
import { normalizePath } from './surface.js';

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

t.test('errorFormatFor picks the longest registered prefix of the normalised path', async (t) => {
  const formats = new Registry<ErrorFormat>('error format');
  const v1: ErrorFormat = { name: 'v1', prefix: '/v1', body: () => 'v1' };
  const messages: ErrorFormat = { name: 'messages', prefix: '/v1/messages', body: () => 'messages' };
  formats.register(v1);
  formats.register(messages);
  t.equal(errorFormatFor(formats, '/v1/chat/completions'), v1);
  t.equal(errorFormatFor(formats, '//V1/models?x=1'), v1);
  t.equal(errorFormatFor(formats, '/v1/messages/count_tokens'), messages);
  t.equal(errorFormatFor(formats, '/v10/x'), null, 'a prefix matches whole segments only');
  t.equal(errorFormatFor(formats, '/api/chat'), null);
});
