/**
 * The principal of the request being handled, for code that runs on its behalf without seeing the
 * request (the inference engine, called by every surface). Core's auth gate enters it before the
 * handler runs (an `AsyncLocalStorage`), so whatever the handler awaits sees it too; outside an
 * HTTP request it is null. This covers every surface, including plugins' own, without each having
 * to pass the principal along (a surface that forgot would bypass the model allow-list). The cost:
 * every promise pays a little more once an `AsyncLocalStorage` is in use, a few µs per request
 * (bench/results/2026-11-27-code-notes.md).
 *
 * Also the generic model check: a principal answers for the models it may use
 * (`Principal.mayUse`); the rule behind the answer belongs to the strategy that made it.
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

/**
 * Whether `principal` may use `model`: its own answer (`Principal.mayUse`, e.g. the glob allow-list
 * of `auth-api-key`'s named keys); without one, every model, unless it carries a `models` list it
 * cannot answer for, which admits none (fail closed). Outside a request (null), every model.
 */
export function mayUse(principal: Principal | null, model: string): boolean {
  if (!principal) return true;
  if (principal.mayUse) return principal.mayUse(model);
  return principal.models === undefined || principal.models === null;
}

/**
 * Refuses (403, naming the model and `param`) a name outside the current principal's allow-list;
 * outside a request, or for a principal without a list, every name passes. Routes that name a
 * model call it on the name asked, before the store is asked, so the answer says nothing of which
 * models exist outside the list.
 */
export function checkModelAllowed(model: string, param = 'model'): void {
  if (!mayUse(currentPrincipal(), model)) {
    throw Errors.forbidden(`this API key may not use the model "${model}"`, { param });
  }
}

/** Whether the current principal may use `model` (for filtering listings). */
export function principalMayUse(model: string): boolean {
  return mayUse(currentPrincipal(), model);
}
