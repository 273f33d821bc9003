/**
 * Which API surface a request belongs to, judged on a normalised path so that no spelling
 * (`//`, `/./`, `..`, percent-encoding, a trailing slash, upper case, a query string) changes the
 * answer. The surface picks the error format: OpenAI's for `/v1/`, Ollama's for the rest.
 *
 * @module
 */

export type Surface = 'openai' | 'ollama' | 'system' | 'other';

/**
 * Normalises a raw request URL for classification: drops the query and fragment, decodes
 * percent-escapes (repeatedly, so `%252e` cannot hide a dot), turns backslashes into slashes,
 * collapses repeated slashes, resolves `.` and `..`, drops a trailing slash and lower-cases.
 */
export function normalizePath(rawUrl: string): string {
  let p = rawUrl.split(/[?#]/, 1)[0] ?? '/';
  for (let i = 0; i < 4; i++) {
    let decoded: string;
    try {
      decoded = decodeURIComponent(p);
    } catch {
      break;
    }
    if (decoded === p) break;
    p = decoded;
  }
  const out: string[] = [];
  for (const seg of p.replace(/\\/g, '/').split('/')) {
    if (seg === '' || seg === '.') continue;
    if (seg === '..') out.pop();
    else out.push(seg);
  }
  return ('/' + out.join('/')).toLowerCase();
}

/** The surface of a raw URL. */
export function surfaceOf(rawUrl: string): Surface {
  const p = normalizePath(rawUrl);
  if (p === '/v1' || p.startsWith('/v1/')) return 'openai';
  if (p === '/api' || p.startsWith('/api/')) return 'ollama';
  if (p === '/system' || p.startsWith('/system/')) return 'system';
  return 'other';
}
