/**
 * Keeping benchmark requests on open connections, and checking that they were.
 *
 * undici hands a finished connection back to its pool only on a later turn of the event loop: a
 * request sent right after the previous answer was read opens a new connection. Against the
 * appliance that is a TLS handshake (3-5 ms on the 2-core development machine, against 0.1-0.3 ms
 * for a plain TCP connect to llama-server or the registry), which a time-to-first-token figure
 * would charge to the server. Clients that keep their connections (the ollama and openai clients,
 * a web UI) pay it once, so the benchmarks wait for {@link settle} before each timed request and
 * report how many connections still opened while they timed ({@link countConnections}).
 *
 * @module
 */
import diagnostics from 'node:diagnostics_channel';

/** One turn of the event loop, after which undici's pool can reuse the last answer's connection. */
export function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** Counts the connections undici opens per origin while `on` is true (from the start: false). */
export function countConnections(): { on: boolean; readonly opened: Record<string, number>; stop(): void } {
  const opened: Record<string, number> = {};
  const state = { on: false, opened, stop: () => diagnostics.unsubscribe('undici:client:connected', listener) };
  const listener = (message: unknown): void => {
    if (!state.on) return;
    const { protocol, hostname, port } = (message as { connectParams: { protocol: string; hostname: string; port: string } }).connectParams;
    const key = `${protocol}//${hostname}:${port}`;
    opened[key] = (opened[key] ?? 0) + 1;
  };
  diagnostics.subscribe('undici:client:connected', listener);
  return state;
}
