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
import { Pool, request, type Dispatcher } from 'undici';

/**
 * A pool of up to 64 keep-alive connections to one origin, with no body or headers timeout. Not an
 * undici `Agent`: in undici 7 (the last line for Node 20) an Agent forgets its pool for an origin
 * whenever one of that pool's connections closes and the connections it counts reach zero, and the
 * lookup is by origin, so the close of an *old* pool's connection also drops the pool that replaced
 * it. Once one connection has closed (a test that cuts one, a server's idle timeout), every request
 * gets a new pool and a new connection, which against the appliance is a TLS handshake (3-4 ms here)
 * charged to its time to first token: measured, 40 of 40 sequential requests opened a connection.
 * undici 8 checks which pool it is dropping; a Pool per origin avoids the bookkeeping altogether.
 */
export function keepAlivePool(origin: string, options: Pool.Options = {}): Pool {
  return new Pool(origin, { bodyTimeout: 0, headersTimeout: 0, connections: 64, ...options });
}

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

/** Requests that {@link timedPost} sent a second time, per origin. */
export const resent: Record<string, number> = {};

/**
 * Sends one JSON POST after {@link settle} and returns the answer with the time it was sent
 * (`performance.now()`). llama-server closes its connection after every streamed answer (curl, too,
 * finds it dead), and undici can send the next request on it before the close arrives: that
 * request fails with "other side closed" (`UND_ERR_SOCKET`) before any answer. It is sent once more,
 * on a new connection, and timed from the second send (counted in {@link resent}). Any other
 * error, or a second failure, is thrown.
 */
export async function timedPost(
  url: string,
  options: { dispatcher?: Dispatcher; headers?: Record<string, string>; body: string },
): Promise<{ res: Dispatcher.ResponseData; t0: number }> {
  for (let attempt = 1; ; attempt++) {
    await settle();
    const t0 = performance.now();
    try {
      const res = await request(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...options.headers },
        body: options.body,
        ...(options.dispatcher ? { dispatcher: options.dispatcher } : {}),
      });
      return { res, t0 };
    } catch (err) {
      if ((err as { code?: string }).code !== 'UND_ERR_SOCKET' || attempt > 1) throw err;
      const origin = new URL(url).origin;
      resent[origin] = (resent[origin] ?? 0) + 1;
    }
  }
}
