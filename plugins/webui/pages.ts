/**
 * The small HTML pages the console answers with when it cannot serve itself, so a browser never
 * sees raw JSON: the service stopped, or the build missing. No script, no style: they pass the
 * strictest CSP.
 *
 * @module
 */

/** A minimal HTML page with a title and paragraphs (already escaped text only). */
export function statePage(title: string, paragraphs: string[]): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><meta name="color-scheme" content="light dark"><title>${title} · LIA</title></head><body><main><h1>${title}</h1>${paragraphs.map((p) => `<p>${p}</p>`).join('')}</main></body></html>`;
}

export const STOPPED_PAGE = statePage('The web console is stopped', [
  'The service <code>svc-webui</code> that serves this page is stopped. The APIs under <code>/api</code>, <code>/v1</code> and <code>/system</code> keep working.',
  'Start it again with <code>POST /system/services/svc-webui/start</code> (scope <code>system:admin</code>), or on the appliance with <code>systemctl start svc-webui</code> where systemd runs it.',
]);

export const NOT_BUILT_PAGE = statePage('The web console is not built', [
  'This installation has no built console files (<code>dist/webui/</code>). Run <code>npm run build</code> in the LIA folder, then reload.',
]);
