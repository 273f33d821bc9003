/**
 * The principal of the request being handled, for code that runs on its behalf without seeing the
 * request (the inference engine, called by every surface). Core's auth gate enters it before the
 * handler runs (an `AsyncLocalStorage`), so whatever the handler awaits sees it too; outside an
 * HTTP request it is null. This covers every surface, including plugins' own, without each having
 * to pass the principal along (a surface that forgot would bypass the model allow-list). The cost:
 * every promise pays a little more once an `AsyncLocalStorage` is in use, a few µs per request
 * (bench/results/2026-11-27-code-notes.md).
 *
 * Also the model allow-list rule of `Principal.models`, so the engine and the docs agree.
 *
 * @module
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { Principal } from '../contracts/auth.js';
import { Errors } from '../errors.js';

const current = new AsyncLocalStorage<Principal>();

/** The principal of the request in whose handler this runs, or null. */
export function currentPrincipal(): Principal | null {
  return current.getStore() ?? null;
}

/** Runs `fn` (and everything it awaits) on behalf of `principal`. */
export function runAs<T>(principal: Principal, fn: () => T): T {
  return current.run(principal, fn);
}

const compiled = new Map<string, RegExp>();

function globToRegExp(pattern: string): RegExp {
  let re = compiled.get(pattern);
  if (!re) {
    const body = pattern.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.');
    re = new RegExp(`^${body}$`, 'i');
    if (compiled.size > 10_000) compiled.clear();
    compiled.set(pattern, re);
  }
  return re;
}

/**
 * Whether a principal's model allow-list admits `model`: null or absent admits all; otherwise a
 * glob pattern (`*`, `?`, case-insensitive) must match the name, or the name without its
 * `:latest` tag (so `llama3` admits `llama3:latest`).
 */
export function modelAllowed(patterns: readonly string[] | null | undefined, model: string): boolean {
  if (!patterns) return true;
  const bare = model.endsWith(':latest') ? model.slice(0, -':latest'.length) : null;
  return patterns.some((p) => {
    const re = globToRegExp(p);
    return re.test(model) || (bare !== null && re.test(bare));
  });
}

/**
 * Refuses (403, naming the model and `param`) a name outside the current principal's allow-list;
 * outside a request, or for a principal without a list, every name passes. Routes that name a
 * model call it on the name asked, before the store is asked, so the answer says nothing of which
 * models exist outside the list.
 */
export function checkModelAllowed(model: string, param = 'model'): void {
  if (!modelAllowed(currentPrincipal()?.models, model)) {
    throw Errors.forbidden(`this API key may not use the model "${model}"`, { param });
  }
}

/** Whether the current principal's allow-list admits `model` (for filtering listings). */
export function principalMayUse(model: string): boolean {
  return modelAllowed(currentPrincipal()?.models, model);
}
