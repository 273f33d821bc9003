/**
 * The control socket: a Unix socket (`<data dir>/run/control.sock`, 0600 in a 0700 directory)
 * through which a local process acts on the service registry without HTTP, a key or the
 * management API. It is how the per-service systemd units drive their role in the appliance
 * process (`lia serve --service NAME`, see `core/cli/commands/serve.ts`): they keep working when
 * `svc-system-api` itself is stopped, and they never loop back through systemctl.
 *
 * Protocol: one JSON object per line each way. Requests `{"service","action"}` with action
 * `start`, `stop`, `status` or `watch`; answers `{"ok":true,"state":{...}}` or
 * `{"ok":false,"error":"..."}`. `watch` answers at once and then sends the service's state
 * every time it changes, until the client disconnects.
 *
 * @module
 */
import { chmod, mkdir, rm } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { type ServiceRegistry, type ServiceState } from './registry.js';

export function controlSocketPath(dataDir: string): string {
  return path.join(dataDir, 'run', 'control.sock');
}

function view(s: Readonly<ServiceState>): Record<string, unknown> {
  return { name: s.name, state: s.state, sub_state: s.subState, since: s.since.toISOString(), error: s.lastError };
}

/** Opens the socket; resolves to a function that closes it. */
export async function openControlSocket(dataDir: string, services: ServiceRegistry): Promise<() => Promise<void>> {
  const file = controlSocketPath(dataDir);
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  await rm(file, { force: true });
  const watchers = new Set<{ socket: net.Socket; service: string }>();
  /** Every open connection: closing ends them all, watching or not (a unit between its start and
   * its `watch` request would otherwise keep `server.close()` waiting forever). */
  const connections = new Set<net.Socket>();
  services.onChange((s) => {
    for (const w of watchers) if (w.service === s.name && !w.socket.destroyed) w.socket.write(JSON.stringify({ ok: true, state: view(s) }) + '\n');
  });
  const server = net.createServer((socket) => {
    connections.add(socket);
    let buffer = '';
    socket.setEncoding('utf8');
    socket.on('error', () => socket.destroy());
    socket.on('close', () => {
      connections.delete(socket);
      for (const w of watchers) if (w.socket === socket) watchers.delete(w);
    });
    socket.on('data', (chunk: string) => {
      buffer += chunk;
      if (buffer.length > 4096) return socket.destroy();
      let nl: number;
      while ((nl = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        void handle(line, socket);
      }
    });
  });
  const reply = (socket: net.Socket, body: unknown): void => {
    if (!socket.destroyed) socket.write(JSON.stringify(body) + '\n');
  };
  async function handle(line: string, socket: net.Socket): Promise<void> {
    let req: { service?: unknown; action?: unknown };
    try {
      req = JSON.parse(line) as typeof req;
    } catch {
      return reply(socket, { ok: false, error: 'not JSON' });
    }
    const service = String(req.service);
    if (!services.has(service)) return reply(socket, { ok: false, error: `unknown service "${service}"` });
    try {
      switch (req.action) {
        case 'start':
          await services.start(service);
          break;
        case 'stop':
          await services.stop(service);
          break;
        case 'status':
          break;
        case 'watch':
          watchers.add({ socket, service });
          break;
        default:
          return reply(socket, { ok: false, error: `unknown action "${String(req.action)}"` });
      }
      reply(socket, { ok: true, state: view(services.get(service)) });
    } catch (err) {
      reply(socket, { ok: false, error: (err as Error).message, state: view(services.get(service)) });
    }
  }
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(file, () => resolve());
  });
  await chmod(file, 0o600);
  return async () => {
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const socket of connections) socket.destroy();
    await closed;
    await rm(file, { force: true });
  };
}
