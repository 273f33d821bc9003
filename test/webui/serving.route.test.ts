/**
 * How the console's files are served (no browser): the page revalidated by ETag, hashed assets
 * immutable, brotli or gzip as the client accepts, the strict CSP, a 404 page for a missing file.
 */
import t from 'tap';
import { startTestAppliance } from '../helpers/appliance.js';

const app = await startTestAppliance({ listen: false });
t.teardown(app.close);

t.test('the page: no-cache with an ETag, strict CSP, 304 when unchanged', async (t) => {
  const res = await app.fetch('/ui/', { auth: false, headers: { 'accept-encoding': 'identity' } });
  t.equal(res.status, 200);
  const html = await res.text();
  t.equal(res.headers.get('cache-control'), 'no-cache');
  t.match(res.headers.get('content-type'), /text\/html/);
  const csp = res.headers.get('content-security-policy') ?? '';
  t.match(csp, /script-src 'self'/);
  t.match(csp, /style-src 'self'/);
  t.notMatch(csp, /unsafe/, 'nothing unsafe allowed');
  t.match(csp, /media-src blob:(;|$)/, 'media only from the blob: URLs the page makes (read aloud)');
  t.notMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/, 'no inline script in the page');
  t.notMatch(html, /https?:\/\//, 'nothing from another origin');
  const etag = res.headers.get('etag');
  t.ok(etag);
  const again = await app.fetch('/ui/', { auth: false, headers: { 'if-none-match': etag! } });
  t.equal(again.status, 304, 'unchanged: 304');

  const script = /src="(\/ui\/assets\/[^"]+\.js)"/.exec(html)?.[1];
  t.ok(script, 'the page loads a hashed script');
  const br = await app.fetch(script!, { auth: false, headers: { 'accept-encoding': 'gzip, br' } });
  t.equal(br.status, 200);
  t.equal(br.headers.get('cache-control'), 'public, max-age=31536000, immutable', 'hashed files are immutable');
  t.equal(br.headers.get('content-encoding'), 'br', 'brotli when accepted');
  t.equal(br.headers.get('vary'), 'Accept-Encoding');
  t.match(br.headers.get('content-type'), /javascript/);
  const gz = await app.fetch(script!, { auth: false, headers: { 'accept-encoding': 'gzip' } });
  t.equal(gz.headers.get('content-encoding'), 'gzip', 'gzip otherwise');
  const plain = await app.fetch(script!, { auth: false, headers: { 'accept-encoding': 'identity' } });
  t.equal(plain.headers.get('content-encoding'), null, 'identity when neither is accepted');
  t.ok((await plain.text()).length > 1000);
  await br.arrayBuffer();
  await gz.arrayBuffer();
});

t.test('a missing file is a small 404 page, not JSON', async (t) => {
  const res = await app.fetch('/ui/assets/nope.js', { auth: false });
  t.equal(res.status, 404);
  t.match(res.headers.get('content-type'), /text\/html/);
  t.match(await res.text(), /Open the console/);
});
