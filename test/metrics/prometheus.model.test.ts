/**
 * `GET /metrics` as a user meets it: the series in Prometheus's text format with bounded labels,
 * and a real Prometheus server (Debian's `prometheus`) scraping the appliance over HTTPS with the
 * CA and the key, then answering a query for the model's series after a few generations. The GPU
 * monitor reads a recorded nvidia-smi output (no GPU here), so the GPU series are checked too.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { access, mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { fakeTool } from '../host/fake-tool.js';
import { ENGINE_ONLY } from '../helpers/plugin-sets.js';
import { startTestAppliance } from '../helpers/appliance.js';
import { createModel } from '../helpers/models.js';

const PROMETHEUS = process.env['LIA_TEST_PROMETHEUS'] ?? '/usr/bin/prometheus';
const MODEL = 'tiny:latest';

const nvidiaSmi = await fakeTool('nvidia-smi', { stdout: 'nvidia/8x-titan-x.csv' });
const app = await startTestAppliance({
  plugins: { ...ENGINE_ONLY, 'host-gpu': { options: { nvidiaSmi: nvidiaSmi.path, sysfsRoot: '/nonexistent', intervalMs: 250 } } },
});
t.teardown(() => app.close());
await createModel(app, 'tiny', 'gguf/stories260K-chatml.gguf');

async function generate(prompt: string): Promise<void> {
  const res = await app.fetch('/api/generate', {
    method: 'POST',
    body: JSON.stringify({ model: 'tiny', prompt, stream: false, options: { num_predict: 8, temperature: 0 } }),
  });
  if (res.status !== 200) throw new Error(`generate: HTTP ${res.status} ${await res.text()}`);
  await res.json();
}

t.test('/metrics needs a key and labels requests by route pattern, never by raw path', async (t) => {
  t.equal((await app.fetch('/metrics', { auth: false })).status, 401);
  await app.fetch('/api/show-me-a-secret-path');
  await app.fetch('/api/tags');
  await generate('Once upon a time');
  const res = await app.fetch('/metrics');
  t.equal(res.status, 200);
  t.match(res.headers.get('content-type'), /^text\/plain; version=0\.0\.4/);
  const text = await res.text();
  t.match(text, /lia_http_requests_total\{method="GET",route="\/api\/tags",status="200"\} 1/);
  t.match(text, /lia_http_requests_total\{method="GET",route="\(unmatched\)",status="404"\} 1/);
  t.notMatch(text, /secret-path/, 'a raw path is never a label');
  t.notMatch(text, /Once upon/, 'a prompt is never a label');
  t.match(text, new RegExp(`lia_model_requests_total\\{model="${MODEL}",kind="generate"\\} 1`));
  t.match(text, new RegExp(`lia_model_loads_total\\{model="${MODEL}"\\} 1`));
  t.match(text, new RegExp(`lia_model_loaded\\{model="${MODEL}",engine="llama-(cpp|server)",device="cpu"\\} 1`), 'where the model runs');
  t.match(text, new RegExp(`lia_model_memory_bytes\\{model="${MODEL}",location="total"\\} [1-9]`));
  t.match(text, new RegExp(`lia_model_time_to_first_token_seconds_count\\{model="${MODEL}"\\} 1`));
  t.match(text, new RegExp(`lia_model_generated_tokens_total\\{model="${MODEL}"\\} [1-9]`));
  t.match(text, /process_resident_memory_bytes \d/);
});

t.test("/metrics carries the GPU monitor's last reading", async (t) => {
  // The monitor samples in the background; its first reading is normally in before the boot ends.
  let text = '';
  for (let i = 0; i < 40 && !text.includes('lia_gpu_memory_used_bytes{'); i++) {
    if (i > 0) await new Promise((r) => setTimeout(r, 250));
    text = await (await app.fetch('/metrics')).text();
  }
  const MB = 1024 * 1024;
  t.match(text, `lia_gpu_memory_used_bytes{gpu="1",name="GeForce GTX TITAN X"} ${10032 * MB}`);
  t.match(text, `lia_gpu_memory_total_bytes{gpu="1",name="GeForce GTX TITAN X"} ${12206 * MB}`);
  t.match(text, 'lia_gpu_temperature_celsius{gpu="1",name="GeForce GTX TITAN X"} 54');
  t.match(text, 'lia_gpu_utilization_ratio{gpu="1",name="GeForce GTX TITAN X"} 0.86');
});

t.test('a real Prometheus scrapes the appliance over HTTPS and answers a query for the model', async (t) => {
  try {
    await access(PROMETHEUS);
  } catch {
    t.fail(`the Prometheus server is missing at ${PROMETHEUS}: install it (Debian: apt-get install prometheus) or set LIA_TEST_PROMETHEUS`);
    return;
  }
  const dir = await mkdtemp(path.join(os.tmpdir(), 'lia-prometheus-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await writeFile(path.join(dir, 'ca.pem'), app.ca);
  await writeFile(path.join(dir, 'key'), app.key, { mode: 0o600 });
  await writeFile(
    path.join(dir, 'prometheus.yml'),
    JSON.stringify({
      global: { scrape_interval: '1s', evaluation_interval: '1s' },
      scrape_configs: [
        {
          job_name: 'lia',
          scheme: 'https',
          tls_config: { ca_file: path.join(dir, 'ca.pem') },
          authorization: { credentials_file: path.join(dir, 'key') },
          static_configs: [{ targets: [`localhost:${app.port}`] }],
        },
      ],
    }),
  );
  const port = await freePort();
  const prometheus = spawn(
    PROMETHEUS,
    [`--config.file=${path.join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${path.join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let log = '';
  prometheus.stderr?.on('data', (c: Buffer) => (log = (log + c.toString()).slice(-4000)));
  t.teardown(() => stop(prometheus));

  for (let i = 0; i < 3; i++) await generate(`Tell me story ${i}`);

  const query = `lia_model_generated_tokens_total{job="lia",model="${MODEL}"}`;
  let result: { value: [number, string] }[] = [];
  let lastUp = '';
  for (let attempt = 0; attempt < 60 && result.length === 0; attempt++) {
    await new Promise((r) => setTimeout(r, 500));
    result = await promQuery(port, query).catch(() => []);
    if (result.length === 0) lastUp = JSON.stringify(await promTargets(port).catch((e: Error) => e.message));
  }
  if (result.length === 0) t.fail(`Prometheus never had the model's series (targets: ${lastUp}; its log: ${log.slice(-1500)})`);
  t.equal(result.length, 1, "Prometheus has the model's series");
  t.ok(Number(result[0]?.value[1]) > 0, 'with the tokens generated');
  const ttft = await promQuery(port, `lia_model_time_to_first_token_seconds_count{model="${MODEL}"}`);
  t.ok(Number(ttft[0]?.value[1]) >= 3, 'time to first token was observed for every generation');
});

async function promQuery(port: number, query: string): Promise<{ value: [number, string] }[]> {
  const res = await fetch(`http://127.0.0.1:${port}/api/v1/query?query=${encodeURIComponent(query)}`);
  const body = (await res.json()) as { status: string; data?: { result: { value: [number, string] }[] } };
  return body.data?.result ?? [];
}

async function promTargets(port: number): Promise<unknown> {
  const res = await fetch(`http://127.0.0.1:${port}/api/v1/targets`);
  const body = (await res.json()) as { data?: { activeTargets?: { health: string; lastError: string }[] } };
  return body.data?.activeTargets?.map((x) => ({ health: x.health, lastError: x.lastError }));
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
}
