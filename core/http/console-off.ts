/**
 * What `/ui/` answers when no plugin serves it (the `webui` plugin disabled): a small public HTML
 * page saying the console is switched off, instead of the JSON "missing API key" that any unknown
 * path gets. Only GET and HEAD of `/ui` and below, only when no route matched; the answer is a
 * 404 and reveals nothing but that the console is off.
 *
 * @module
 */
import type { FastifyRequest } from 'fastify';
import { normalizePath } from './surface.js';

/** True for an unmatched GET/HEAD of `/ui` or a path under it. */
export function isConsoleOffRequest(request: FastifyRequest): boolean {
  if (request.is404 !== true || (request.method !== 'GET' && request.method !== 'HEAD')) return false;
  return /^\/ui(\/|$)/.test(normalizePath(request.url));
}

export const CONSOLE_OFF_PAGE =
  '<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">' +
  '<meta name="color-scheme" content="light dark"><title>Web console switched off · LIA</title></head><body><main>' +
  '<h1>The web console is switched off</h1>' +
  '<p>This appliance runs without its web console (the <code>webui</code> plugin is disabled in its configuration). ' +
  'The APIs under <code>/api</code>, <code>/v1</code> and <code>/system</code> work as usual with an API key.</p>' +
  '<p>To turn the console on, set <code>plugins: { webui: true }</code> in the configuration and restart the appliance.</p>' +
  '</main></body></html>';
