/**
 * Benchmark for the runtime (issue 2): requests per second over TLS keep-alive for `GET /health`
 * and for an authenticated cheap route (`GET /api/version` with the Bearer key), against nginx
 * from Debian serving a static 200 over TLS with the same certificate and cipher policy, in the
 * same run, with the same load generator (wrk). Also the appliance's idle RSS after start.
 *
 * A third server gives the floor of the platform: a bare `node:https` server answering the same
 * static 200 with the same certificate and TLS policy, so the report separates what Node's TLS
 * costs from what the appliance adds.
 *
 * Usage: node --conditions=lia-source --import tsx bench/http/run.ts [--duration 10] [--connections 32]
 * Needs: nginx and wrk (apt-get install nginx wrk).
 *
 * @module
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { freePort, startApplianceProcess } from '../lib/appliance-process.js';
import { TLS_POLICY } from '../../core/http/tls-policy.js';

const run = promisify(execFile);
const { values } = parseArgs({ options: { duration: { type: 'string', default: '10' }, connections: { type: 'string', default: '32' } } });

async function startNginx(dir: string, port: number, certDir: string): Promise<ChildProcess> {
  const conf = `
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:${port} ssl;
    ssl_certificate ${certDir}/leaf.crt;
    ssl_certificate_key ${certDir}/leaf.key;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_ciphers ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305;
    location / { default_type application/json; return 200 '{"status":"ok"}'; }
  }
}`;
  await writeFile(path.join(dir, 'nginx.conf'), conf);
  const child = spawn('nginx', ['-c', path.join(dir, 'nginx.conf'), '-g', 'daemon off;'], { stdio: 'inherit' });
  await new Promise((r) => setTimeout(r, 500));
  return child;
}

/** A bare node:https server with the same leaf and TLS policy, in its own process. */
async function startBareNode(port: number, certDir: string): Promise<ChildProcess> {
  const policy = JSON.stringify(TLS_POLICY);
  const code = `
    const https = require('node:https'); const fs = require('node:fs');
    const opts = { ...${policy}, key: fs.readFileSync('${certDir}/leaf.key'), cert: fs.readFileSync('${certDir}/leaf.crt') };
    https.createServer(opts, (req, res) => { res.writeHead(200, { 'content-type': 'application/json' }); res.end('{"status":"ok"}'); })
      .listen(${port}, '127.0.0.1');`;
  const child = spawn(process.execPath, ['-e', code], { stdio: 'inherit' });
  await new Promise((r) => setTimeout(r, 500));
  return child;
}

/** Runs wrk and returns requests per second. */
async function wrk(url: string, headers: string[] = []): Promise<{ rps: number; latencyP99: string }> {
  const args = ['-t1', `-c${values.connections}`, `-d${values.duration}s`, '--latency', ...headers.flatMap((h) => ['-H', h]), url];
  const { stdout } = await run('wrk', args);
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(stdout)?.[1] ?? 'NaN');
  const p99 = /99%\s+(\S+)/.exec(stdout)?.[1] ?? '?';
  if (/Non-2xx/.test(stdout)) throw new Error(`non-2xx answers from ${url}:\n${stdout}`);
  return { rps, latencyP99: p99 };
}

async function rssMb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1]) / 1024;
}

const dir = await mkdtemp(path.join(os.tmpdir(), 'lia-bench-http-'));
const app = await startApplianceProcess();
const appPort = app.port;
const [nginxPort, barePort] = [await freePort(), await freePort()];
const nginx = await startNginx(dir, nginxPort, path.join(app.dataDir, 'pki'));
const bare = await startBareNode(barePort, path.join(app.dataDir, 'pki'));
try {
  await new Promise((r) => setTimeout(r, 5000));
  const idleRss = await rssMb(app.pid);
  const auth = [`Authorization: Bearer ${app.key}`];
  // Warm up both servers.
  await wrk(`https://127.0.0.1:${appPort}/health`);
  const nginxResult = await wrk(`https://127.0.0.1:${nginxPort}/health`);
  const health = await wrk(`https://127.0.0.1:${appPort}/health`);
  const version = await wrk(`https://127.0.0.1:${appPort}/api/version`, auth);
  const bareNode = await wrk(`https://127.0.0.1:${barePort}/health`);
  const nginxAgain = await wrk(`https://127.0.0.1:${nginxPort}/health`);
  const nginxRps = (nginxResult.rps + nginxAgain.rps) / 2;
  const result = {
    machine: `${os.cpus().length} cores, ${os.cpus()[0]?.model}`,
    connections: Number(values.connections),
    durationSeconds: Number(values.duration),
    nginx: { rps: Math.round(nginxRps), p99: nginxResult.latencyP99 },
    health: { rps: Math.round(health.rps), p99: health.latencyP99, ratio: +(health.rps / nginxRps).toFixed(3) },
    authenticatedApiVersion: { rps: Math.round(version.rps), p99: version.latencyP99, ratio: +(version.rps / nginxRps).toFixed(3) },
    bareNodeHttps: { rps: Math.round(bareNode.rps), p99: bareNode.latencyP99, ratioToNginx: +(bareNode.rps / nginxRps).toFixed(3) },
    healthVsBareNode: +(health.rps / bareNode.rps).toFixed(3),
    idleRssMb: +idleRss.toFixed(1),
  };
  console.log(JSON.stringify(result, null, 2));
} finally {
  await app.close();
  nginx.kill('SIGQUIT');
  bare.kill('SIGTERM');
}
