/**
 * `lia serve --service NAME` for every NAME but `svc-proxy`: the process a per-service systemd
 * unit runs. The appliance process itself is `svc-proxy`'s unit; this one attaches to it through
 * the control socket, starts its role, reports every state change on stdout (the unit's journal)
 * and stays as long as the role runs. SIGTERM (systemctl stop) stops the role and exits 0 (a
 * second signal exits at once); a role that fails, or an appliance that goes away, exits 1 so
 * that systemd marks the unit failed and restarts it (`Restart=on-failure`).
 *
 * @module
 */
import net from 'node:net';
import os from 'node:os';
import { controlSocketPath } from '../services/control-socket.js';
import type { CliIO } from './types.js';

interface Answer {
  ok: boolean;
  error?: string;
  state?: { state: string; sub_state: string; error: string | null };
}

/** Connects, retrying while the appliance starts. Defaults to 60 s of patience. */
async function connect(file: string, patienceMs = 60_000): Promise<net.Socket> {
  const deadline = Date.now() + patienceMs;
  for (;;) {
    try {
      return await new Promise<net.Socket>((resolve, reject) => {
        const s = net.connect(file, () => resolve(s));
        s.once('error', reject);
      });
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}

export async function attach(service: string, dataDir: string, io: CliIO): Promise<number> {
  const file = controlSocketPath(dataDir);
  let socket: net.Socket;
  try {
    socket = await connect(file);
  } catch (err) {
    io.stderr.write(`lia: cannot reach the appliance's control socket ${file}: ${(err as Error).message} (is svc-proxy running?)\n`);
    return 1;
  }
  socket.setEncoding('utf8');
  const send = (action: string): void => void socket.write(JSON.stringify({ service, action }) + '\n');
  return await new Promise<number>((resolve) => {
    let buffer = '';
    let stopping = false;
    let started = false;
    const finish = (code: number): void => {
      socket.destroy();
      resolve(code);
    };
    socket.on('data', (chunk: string) => {
      buffer += chunk;
      let nl: number;
      while ((nl = buffer.indexOf('\n')) >= 0) {
        const answer = JSON.parse(buffer.slice(0, nl)) as Answer;
        buffer = buffer.slice(nl + 1);
        const state = answer.state?.state;
        if (state) io.stdout.write(`${service}: ${state} (${answer.state?.sub_state})${answer.state?.error ? `: ${answer.state.error}` : ''}\n`);
        if (!answer.ok) {
          io.stderr.write(`lia: ${service}: ${answer.error}\n`);
          return finish(1);
        }
        if (!started && state === 'active') {
          started = true;
          send('watch');
        }
        if (stopping && state === 'inactive') return finish(0);
        if (state === 'failed') return finish(1);
      }
    });
    socket.on('close', () => {
      if (!stopping) io.stderr.write(`lia: ${service}: the appliance went away\n`);
      resolve(stopping ? 0 : 1);
    });
    // `on`, not `once`: a library that re-raises a signal once no other listener is left
    // (signal-exit) would end the process before the role is stopped. A second signal exits at once.
    const stop = (signal: NodeJS.Signals): void => {
      if (stopping) return finish(128 + (os.constants.signals[signal] ?? 0));
      stopping = true;
      send('stop');
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
    send('start');
  });
}
