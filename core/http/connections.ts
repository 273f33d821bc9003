/**
 * Connection limits of the HTTPS server: per-phase timeouts, and a cap on the connections that
 * have not yet shown a key, so that idle or slow sockets cannot pile up and exhaust file
 * descriptors while `/health` and clients with a key still get through.
 *
 * Per phase, as nginx and Caddy split them (reasons in docs/security.md, Connections):
 * - the TLS handshake must finish within `tlsHandshakeTimeoutMs` (Node's own is 120 s);
 * - a request's headers must be complete within `headersTimeoutMs` of the connection being ready
 *   (or of the request's first byte on a kept-alive connection), checked every second, else 408
 *   and the connection is closed; this also ends a slowloris sending its headers byte by byte;
 * - an idle kept-alive connection closes after `keepAliveTimeoutMs`;
 * - a request body and a response have no time limit: a model blob upload or a long stream can
 *   take many minutes.
 *
 * A connection counts as unauthenticated from its TCP accept until one of its requests passes
 * the auth gate ({@link markAuthenticated}, called by ./auth.ts). When more than
 * `maxUnauthenticatedConnections` are open, or more than `maxConnections` in all, the
 * unauthenticated connection that has been idle longest (no request being answered; possibly
 * still in its handshake or headers) is closed; only when none is idle is the new connection
 * refused. A flood of idle sockets thus evicts itself, and a new client (a key, a `/health`
 * probe) is let in.
 *
 * @module
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Server } from 'node:https';
import type { Socket } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';

/** The settings this module reads (core/config/schema.ts states their defaults). */
export interface ConnectionLimits {
  tlsHandshakeTimeoutMs?: number;
  headersTimeoutMs?: number;
  keepAliveTimeoutMs?: number;
  maxUnauthenticatedConnections?: number;
  maxConnections?: number;
}

/** Defaults of the settings, the figures docs/configuration.md gives. */
export const CONNECTION_DEFAULTS = {
  tlsHandshakeTimeoutMs: 10_000,
  headersTimeoutMs: 10_000,
  keepAliveTimeoutMs: 72_000,
  maxUnauthenticatedConnections: 256,
  maxConnections: 1024,
} as const;

/** How often Node checks for overdue headers: every second, or a quarter of the timeout if shorter. */
function checkIntervalMs(headersTimeoutMs: number): number {
  return Math.max(100, Math.min(1_000, Math.floor(headersTimeoutMs / 4)));
}

/**
 * The timeouts to pass to `https.createServer`. `requestTimeout: 0`: no limit on receiving a
 * whole request (Node's 5 minutes would cut a large upload); the headers have their own limit.
 */
export function serverTimeouts(limits: ConnectionLimits) {
  const headersTimeout = limits.headersTimeoutMs ?? CONNECTION_DEFAULTS.headersTimeoutMs;
  return {
    handshakeTimeout: limits.tlsHandshakeTimeoutMs ?? CONNECTION_DEFAULTS.tlsHandshakeTimeoutMs,
    headersTimeout,
    connectionsCheckingInterval: checkIntervalMs(headersTimeout),
    keepAliveTimeout: limits.keepAliveTimeoutMs ?? CONNECTION_DEFAULTS.keepAliveTimeoutMs,
    requestTimeout: 0,
  };
}

interface Entry {
  /** The socket to destroy: the TCP socket until the handshake is done, then the TLS socket. */
  socket: Socket;
  /** `remoteAddress|remotePort`: finds the entry of a TLS socket from its TCP socket. */
  peer: string;
  authenticated: boolean;
  /** Requests on this connection being answered. */
  busy: number;
  /** Counted out of `open` already (destroyed by the guard; its `close` event comes later). */
  closed: boolean;
}

/** The entry of each TLS socket, for {@link markAuthenticated}. */
const bySocket = new WeakMap<object, { entry: Entry; guard: Guard }>();

/**
 * Marks the connection a request came on as authenticated: it no longer counts against
 * `maxUnauthenticatedConnections` and is never evicted. A socket the guard does not know is ignored.
 */
export function markAuthenticated(socket: object | null | undefined): void {
  if (!socket) return;
  const found = bySocket.get(socket);
  if (found && !found.entry.authenticated) found.guard.authenticate(found.entry);
}

interface Guard {
  authenticate(entry: Entry): void;
}

/**
 * Requests one connection may have being answered at once. HTTP/1.1 lets a client send requests
 * before it reads the answers (pipelining), and Node parses every request of a received chunk at
 * once: a client that never reads would hold hundreds of answers per connection. Past this many
 * the connection is closed; its client may reconnect. Go's server (Caddy) answers a connection's
 * requests one at a time; no HTTP/1.1 client pipelines this deep.
 */
export const MAX_REQUESTS_PER_CONNECTION = 16;

/** Evictions are counted in the log at most once per minute. */
const LOG_EVERY_MS = 60_000;

/** Tracks the server's connections and applies the caps. */
export function installConnectionGuard(server: Server, limits: ConnectionLimits, log: FastifyBaseLogger): void {
  const maxUnauthenticated = limits.maxUnauthenticatedConnections ?? CONNECTION_DEFAULTS.maxUnauthenticatedConnections;
  const maxConnections = limits.maxConnections ?? CONNECTION_DEFAULTS.maxConnections;
  // Open connections, least recently active first (a Map keeps insertion order), and of those
  // the unauthenticated ones.
  const all = new Map<Entry, true>();
  const unauthenticated = new Map<Entry, true>();
  const byPeer = new Map<string, Entry>();
  let open = 0;
  let unlogged = 0;
  let lastLog = 0;

  const guard: Guard = {
    authenticate(entry) {
      entry.authenticated = true;
      unauthenticated.delete(entry);
    },
  };

  /** The connection of `set` idle the longest, or undefined when every one is busy. */
  function oldestIdle(set: Map<Entry, true>): Entry | undefined {
    for (const entry of set.keys()) if (entry.busy === 0) return entry;
    return undefined;
  }

  function forget(entry: Entry): void {
    if (entry.closed) return;
    entry.closed = true;
    open--;
    all.delete(entry);
    unauthenticated.delete(entry);
    if (byPeer.get(entry.peer) === entry) byPeer.delete(entry.peer);
  }

  function evict(entry: Entry, why = 'over the connection caps'): void {
    forget(entry);
    entry.socket.destroy();
    unlogged++;
    const now = Date.now();
    if (now - lastLog >= LOG_EVERY_MS) {
      log.warn(
        { closed: unlogged, open, unauthenticated: unauthenticated.size, maxUnauthenticatedConnections: maxUnauthenticated, maxConnections },
        `closed ${unlogged} connection(s): ${why}`,
      );
      lastLog = now;
      unlogged = 0;
    }
  }

  server.on('connection', (socket: Socket) => {
    const entry: Entry = { socket, peer: `${socket.remoteAddress}|${socket.remotePort}`, authenticated: false, busy: 0, closed: false };
    open++;
    unauthenticated.set(entry, true);
    all.set(entry, true);
    byPeer.set(entry.peer, entry);
    socket.once('close', () => forget(entry));
    // The new connection is the most recent one, so it goes only when no other can: it is refused.
    while (unauthenticated.size > maxUnauthenticated) evict(oldestIdle(unauthenticated) ?? entry);
    // Over the global cap: an idle one without a key first, else the longest idle one with a key
    // (its client reconnects).
    while (open > maxConnections && !entry.closed) evict(oldestIdle(unauthenticated) ?? oldestIdle(all) ?? entry);
  });

  // A failed or overdue handshake closes the socket. https.Server hands TLS errors to the HTTP
  // `clientError` handler, whose HTTP answer would wait forever for a handshake that never comes
  // (Node then never closes a socket past `handshakeTimeout`); this listener runs after it.
  server.on('tlsClientError', (_err: Error, tlsSocket: Socket) => tlsSocket.destroy());

  server.on('secureConnection', (tlsSocket: Socket) => {
    const entry = byPeer.get(`${tlsSocket.remoteAddress}|${tlsSocket.remotePort}`);
    if (!entry) return;
    byPeer.delete(entry.peer);
    entry.socket = tlsSocket;
    bySocket.set(tlsSocket, { entry, guard });
  });

  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const found = bySocket.get(req.socket);
    if (!found) return;
    const { entry } = found;
    entry.busy++;
    if (entry.busy > MAX_REQUESTS_PER_CONNECTION && !entry.closed) {
      evict(entry, `over ${MAX_REQUESTS_PER_CONNECTION} pipelined requests`);
      return;
    }
    res.once('close', () => {
      entry.busy--;
      // Active just now: to the back of the eviction order.
      if (entry.closed) return;
      all.delete(entry);
      all.set(entry, true);
      if (unauthenticated.delete(entry)) unauthenticated.set(entry, true);
    });
  });
}
