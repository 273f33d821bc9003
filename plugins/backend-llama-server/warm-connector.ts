/**
 * A connection to llama-server opened ahead of the request that needs it.
 *
 * llama-server closes its connection after every streamed answer, so every generation began with
 * a connect: on a small machine a few hundred microseconds on the first token's path
 * (bench/results/2026-12-07-request-path.md). This connector keeps one spare. Each time it hands
 * a connection out, it opens the next one once the request on it is written, so the request after
 * finds one ready, even when it comes the moment the answer before it ends (llama-server closes a
 * connection only after its answer is sent).
 *
 * The server ends a connection left idle for 5 s. A spare it ended is forgotten, not replaced: an
 * idle server is not sent new connections. A spare older than `maxAgeMs` is dropped rather than
 * handed out, as the server may be closing it. A request that finds no spare connects as before.
 *
 * @module
 */
import type { Socket } from 'node:net';
import { buildConnector } from 'undici';

/** llama-server (cpp-httplib) closes a connection idle for 5 s; a spare this old is not trusted. */
const SPARE_MAX_AGE_MS = 4000;

/** An undici connector that can be told to drop its spare and open no more. */
export type WarmConnector = buildConnector.connector & { close(): void };

/** undici's connector for `options`, keeping one connection ready (see the module's description). */
export function warmConnector(options: buildConnector.BuildOptions, { maxAgeMs = SPARE_MAX_AGE_MS } = {}): WarmConnector {
  const connect = buildConnector(options);
  let spare: { socket: Socket; at: number } | null = null;
  let last: buildConnector.Options | null = null;
  let closed = false;

  const prepare = (): void => {
    if (closed || spare || !last) return;
    connect(last, (err, socket) => {
      if (err || !socket) return;
      if (closed || spare) return void socket.destroy();
      const entry = { socket: socket, at: performance.now() };
      spare = entry;
      // The server ended it while idle: forgotten, not replaced.
      socket.once('close', () => spare === entry && (spare = null));
      socket.on('error', () => undefined); // undici adds its own once the socket is in use
    });
  };

  const handOut = (socket: Socket, callback: buildConnector.Callback): void => {
    callback(null, socket);
    // undici writes the request in this turn; the next connection opens after it.
    setImmediate(prepare);
  };

  const connector: WarmConnector = Object.assign(
    (opts: buildConnector.Options, callback: buildConnector.Callback) => {
      last = opts;
      const ready = spare;
      spare = null;
      if (ready && !ready.socket.destroyed && performance.now() - ready.at < maxAgeMs) {
        process.nextTick(handOut, ready.socket, callback);
        return;
      }
      ready?.socket.destroy();
      connect(opts, (err, socket) => (err || !socket ? callback(err, null) : handOut(socket, callback)));
    },
    {
      close(): void {
        closed = true;
        spare?.socket.destroy();
        spare = null;
      },
    },
  );
  return connector;
}
