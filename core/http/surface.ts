/**
 * The normalised form of a request path, on which core decides which API surface (and so which
 * error format) a request belongs to: no spelling (`//`, `/./`, `..`, percent-encoding, a trailing
 * slash, upper case, a query string) changes the answer.
 *
 * @module
 */

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
