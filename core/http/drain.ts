/**
 * Draining the HTTPS server at shutdown (SIGTERM, SIGINT, `systemctl stop`): the listening socket
 * closes, idle keep-alive connections close at once, a request that arrives on an open connection
 * gets 503 with `Connection: close`, and the requests in flight get the grace period
 * (`shutdownGraceMs`, 10 s by default) to finish. A connection closes as soon as its request is
 * answered. When the grace period ends, every request still running is aborted through
 * {@link drainSignal} with a 503 error, so a stream ends with the error frame of its surface (an
 * NDJSON `{"error": …}` line, an SSE error frame) rather than a cut connection; the connections
 * still open a moment later are closed.
 *
 * @module
 */
import { setMaxListeners } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { Errors } from '../errors.js';

/** The grace period when the configuration names none. 10 s. */
export const DEFAULT_SHUTDOWN_GRACE_MS = 10_000;

/** How long the error frames of streams aborted at the end of the grace period get to go out. 2 s. */
const FLUSH_MS = 2_000;

interface DrainState {
  controller: AbortController;
  inFlight: Set<ServerResponse>;
  draining: boolean;
}

const states = new WeakMap<object, DrainState>();

/**
 * Aborts when the server's grace period is over, with the error that ends the request; undefined
 * for a server that has no drain installed.
 */
export function drainSignal(server: object): AbortSignal | undefined {
  return states.get(server)?.controller.signal;
}

export interface DrainResult {
  /** Requests in flight when the drain began. */
  inFlight: number;
  /** Requests that were still running when the grace period ended (aborted with an error). */
  aborted: number;
}

export interface Drain {
  /** Requests being answered now. */
  inFlight(): number;
  /** Stops accepting and waits for the requests in flight, at most `graceMs` (then aborts them). */
  run(graceMs: number): Promise<DrainResult>;
}

/** Tracks the server's requests and refuses new ones once the drain has begun. */
export function installDrain(app: FastifyInstance): Drain {
  const server = app.server;
  const state: DrainState = { controller: new AbortController(), inFlight: new Set(), draining: false };
  // Every stream in flight listens to it (`clientGone`) until it ends: one listener per request, by design.
  setMaxListeners(0, state.controller.signal);
  states.set(server, state);
  // The answers of each connection: an answer queued behind others on a connection that closes
  // (a pipelining client gone) may never emit its own `close`, so the connection's takes them out.
  const bySocket = new WeakMap<object, Set<ServerResponse>>();
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket;
    if (socket.destroyed) return; // parsed from a chunk of a connection already closed
    let answers = bySocket.get(socket);
    if (!answers) {
      const set = (answers = new Set());
      bySocket.set(socket, set);
      socket.once('close', () => {
        for (const r of set) state.inFlight.delete(r);
        set.clear();
      });
    }
    answers.add(res);
    state.inFlight.add(res);
    res.once('close', () => {
      state.inFlight.delete(res);
      answers.delete(res);
      // The connection is idle once its response is out: close it rather than wait for keep-alive.
      if (state.draining) setImmediate(() => server.closeIdleConnections());
    });
  });
  app.addHook('onRequest', async (_request, reply) => {
    if (!state.draining) return;
    reply.header('connection', 'close');
    throw Errors.unavailable('the appliance is shutting down');
  });

  let running: Promise<DrainResult> | null = null;
  return {
    inFlight: () => state.inFlight.size,
    run(graceMs) {
      running ??= new Promise<DrainResult>((resolve) => {
        const inFlight = state.inFlight.size;
        let aborted = 0;
        state.draining = true;
        const timers: NodeJS.Timeout[] = [];
        server.close(() => {
          for (const t of timers) clearTimeout(t);
          resolve({ inFlight, aborted });
        });
        server.closeIdleConnections();
        timers.push(
          setTimeout(() => {
            aborted = state.inFlight.size;
            state.controller.abort(
              Errors.unavailable(`the appliance is shutting down: the request did not finish within the ${graceMs / 1000} s grace period`),
            );
            timers.push(setTimeout(() => server.closeAllConnections(), FLUSH_MS));
          }, graceMs),
        );
      });
      return running;
    },
  };
}
