/**
 * A keyless client that pipelines requests on its TLS connections and never reads the answers:
 * what it costs the appliance, this checkout against another (an earlier commit, built), in one
 * run. Each side is `lia serve` in its own process (the built dist/, the default plugins); each
 * round opens `--connections` connections that each write `--requests` pipelined `GET /api/tags`
 * without a key at once and never read; a connection the appliance does not close is held open,
 * as an attacker holds it, until the end of the run. Keyed `GET /api/version` probes run meanwhile.
 * The appliance runs with a heap of `--heap` MB (`--max-old-space-size`), so what it keeps shows
 * as a death rather than as a machine's memory. Reported per side: its resident memory (VmRSS of
 * /proc) before and after each round, the connections it closed itself, the keyed probes that
 * failed, and whether the process lived.
 *
 *   npm run build && node --conditions=lia-source --import tsx bench/security/pipelining.ts \
 *     [--anchor /path/to/built/checkout] [--rounds 4] [--connections 200] [--requests 400]
 *
 * @module
 */
import { readFile } from 'node:fs/promises';
import tls from 'node:tls';
import { parseArgs } from 'node:util';
import { startApplianceProcess, type ApplianceProcess } from '../lib/appliance-process.js';

const { values: flags } = parseArgs({
  options: {
    anchor: { type: 'string' },
    rounds: { type: 'string', default: '4' },
    connections: { type: 'string', default: '200' },
    requests: { type: 'string', default: '400' },
    seconds: { type: 'string', default: '10' },
    heap: { type: 'string', default: '512' },
  },
});
const ROUNDS = Number(flags.rounds);
const CONNECTIONS = Number(flags.connections);
const REQUESTS = Number(flags.requests);
const SECONDS = Number(flags.seconds);

async function rssMb(pid: number): Promise<number | null> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => null);
  const kb = status ? Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN) : NaN;
  return Number.isFinite(kb) ? Math.round(kb / 1024) : null;
}

/** Connections the appliance left open, held until the end of the run. */
const held: tls.TLSSocket[] = [];

/** One flooding connection; resolves with whether the appliance closed it within `--seconds`. */
function flood(app: ApplianceProcess): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = tls.connect({ port: app.port, host: '127.0.0.1', servername: 'localhost', ca: app.ca }, () => {
      socket.pause();
      socket.write('GET /api/tags HTTP/1.1\r\nHost: localhost\r\n\r\n'.repeat(REQUESTS));
    });
    let done = false;
    const end = (closedByServer: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (closedByServer) socket.destroy();
      else held.push(socket);
      resolve(closedByServer);
    };
    const timer = setTimeout(() => end(false), SECONDS * 1000);
    socket.on('error', () => end(true));
    socket.on('close', () => end(true));
  });
}

interface Side {
  label: string;
  before: number | null;
  rounds: Array<{ rss: number | null; closed: number; probesFailed: number; probes: number }>;
  after: number | null;
  alive: boolean;
}

async function measure(label: string, root?: string): Promise<Side> {
  const app = await startApplianceProcess(
    { plugins: { 'host-network': { options: { mdns: 'off' } } } },
    { NODE_OPTIONS: `--max-old-space-size=${flags.heap}` },
    root,
  );
  const side: Side = { label, before: await rssMb(app.pid), rounds: [], after: null, alive: true };
  try {
    for (let r = 0; r < ROUNDS; r++) {
      let probing = true;
      let probes = 0;
      let probesFailed = 0;
      const prober = (async () => {
        while (probing) {
          probes++;
          const ok = await app
            .fetch('/api/version', { signal: AbortSignal.timeout(5000) })
            .then(async (res) => (await res.arrayBuffer(), res.status === 200))
            .catch(() => false);
          if (!ok) probesFailed++;
          await new Promise((res) => setTimeout(res, 200));
        }
      })();
      const closed = (await Promise.all(Array.from({ length: CONNECTIONS }, () => flood(app)))).filter(Boolean).length;
      probing = false;
      await prober;
      side.rounds.push({ rss: await rssMb(app.pid), closed, probesFailed, probes });
      if ((await rssMb(app.pid)) === null) {
        side.alive = false;
        break;
      }
    }
    await new Promise((res) => setTimeout(res, 10_000));
    side.after = await rssMb(app.pid);
    side.alive &&= side.after !== null;
  } finally {
    for (const s of held.splice(0)) s.destroy();
    await Promise.race([app.close().catch(() => undefined), new Promise((res) => setTimeout(res, 30_000))]);
  }
  return side;
}

const sides = [await measure('this checkout')];
if (flags.anchor) sides.push(await measure(`anchor (${flags.anchor})`, flags.anchor));

console.log(
  `${CONNECTIONS} connections × ${REQUESTS} pipelined keyless GET /api/tags, never read, held open; ${ROUNDS} rounds; appliance heap ${flags.heap} MB\n`,
);
console.log('| side | RSS before | RSS after each round (MB) | closed by the appliance | keyed probes failed | RSS 10 s after | alive |');
console.log('|---|---|---|---|---|---|---|');
for (const s of sides) {
  console.log(
    `| ${s.label} | ${s.before} | ${s.rounds.map((r) => r.rss ?? '—').join(', ')} | ${s.rounds.map((r) => `${r.closed}/${CONNECTIONS}`).join(', ')} | ${s.rounds
      .map((r) => `${r.probesFailed}/${r.probes}`)
      .join(', ')} | ${s.after ?? '—'} | ${s.alive ? 'yes' : 'no'} |`,
  );
}
