/**
 * The system page: host figures with charts of the last minutes (polled from `/system/status`
 * and `/system/gpu`), the services with start/stop/restart, a log viewer, the network and the
 * host name, and the master key rotation.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, json, request } from '../api';
import { getKey, replaceKey } from '../auth';
import { Confirm, CopyButton, ErrorPanel, useLoad } from '../common';
import { duration } from '../format';
import { Chart } from './Chart';

interface Status {
  hostname: string;
  version: string;
  uptime_seconds: number;
  cpu_percent: number;
  memory: { total_gb: number; used_percent: number };
  disk: { models: { total: string; used: string; free: string }; total: string };
}
interface Gpu {
  vendor: string;
  devices: { name: string; vram_total_mb: number; vram_used_mb: number; temp_c: number }[];
}
interface Service {
  name: string;
  description: string;
  state: string;
  sub_state: string;
  since: string | null;
}
interface Network {
  hostname: string;
  interfaces: { name: string; mac: string | null; addresses: { address: string; family: string; prefix: number; internal: boolean }[] }[];
  mdns: { enabled: boolean; responder: string; hostname: string | null; state?: string; error?: string | null };
}

/** Seconds between samples, and how many are kept (10 minutes). */
const SAMPLE_SECONDS = 5;
const SAMPLES = 120;

function useSamples() {
  const [status, setStatus] = useState<Status | null>(null);
  const [gpu, setGpu] = useState<Gpu | null>(null);
  const [error, setError] = useState<unknown>(null);
  const hist = useRef<{ t: number[]; cpu: number[]; mem: number[]; vram: number[][]; temp: number[][] }>({ t: [], cpu: [], mem: [], vram: [], temp: [] });
  useEffect(() => {
    let stopped = false;
    const tick = async () => {
      try {
        const [s, g] = await Promise.all([json<Status>('/system/status'), json<Gpu>('/system/gpu').catch(() => null)]);
        if (stopped) return;
        const h = hist.current;
        h.t.push(Date.now() / 1000);
        h.cpu.push(s.cpu_percent);
        h.mem.push(s.memory.used_percent);
        g?.devices.forEach((d, i) => {
          (h.vram[i] ??= []).push(d.vram_total_mb ? (100 * d.vram_used_mb) / d.vram_total_mb : 0);
          (h.temp[i] ??= []).push(d.temp_c);
        });
        if (h.t.length > SAMPLES) {
          h.t.shift();
          h.cpu.shift();
          h.mem.shift();
          h.vram.forEach((v) => v.shift());
          h.temp.forEach((v) => v.shift());
        }
        setStatus(s);
        setGpu(g);
        setError(null);
      } catch (err) {
        if (!stopped) setError(err);
      }
    };
    void tick();
    const timer = setInterval(tick, SAMPLE_SECONDS * 1000);
    return () => {
      stopped = true;
      clearInterval(timer);
    };
  }, []);
  return { status, gpu, error, hist: hist.current };
}

const COLORS = ['#2f7de1', '#d9480f', '#2b8a3e', '#ae3ec9'];

function Dashboard() {
  const { status, gpu, error, hist } = useSamples();
  return (
    <section class="card" aria-labelledby="host-title">
      <h2 id="host-title">Host</h2>
      <ErrorPanel error={error} what="the status" />
      {/* Drawn before the first answer with placeholders, so the page does not move when it comes. */}
      <dl class="facts">
        <div>
          <dt>Host name</dt>
          <dd data-testid="hostname">{status?.hostname ?? '…'}</dd>
        </div>
        <div>
          <dt>Version</dt>
          <dd>{status?.version ?? '…'}</dd>
        </div>
        <div>
          <dt>Uptime</dt>
          <dd>{status ? duration(status.uptime_seconds) : '…'}</dd>
        </div>
        <div>
          <dt>CPU</dt>
          <dd>{status ? `${status.cpu_percent.toFixed(0)} %` : '…'}</dd>
        </div>
        <div>
          <dt>Memory</dt>
          <dd>{status ? `${status.memory.used_percent.toFixed(0)} % of ${status.memory.total_gb} GB` : '…'}</dd>
        </div>
        <div>
          <dt>Model store</dt>
          <dd>{status ? `${status.disk.models.used} used, ${status.disk.models.free} free of ${status.disk.models.total}` : '…'}</dd>
        </div>
        {gpu?.devices.map((d, i) => (
          <div key={i}>
            <dt>GPU {i}</dt>
            <dd>
              {d.name}: {d.vram_used_mb} / {d.vram_total_mb} MB, {d.temp_c} °C
            </dd>
          </div>
        ))}
        {gpu && gpu.devices.length === 0 && (
          <div>
            <dt>GPU</dt>
            <dd>none detected</dd>
          </div>
        )}
      </dl>
      <div class="grid2">
        <Chart
          title="CPU and memory (%)"
          max={100}
          span={SAMPLES * SAMPLE_SECONDS}
          times={hist.t}
          series={[
            { label: 'CPU', color: COLORS[0]!, values: hist.cpu },
            { label: 'Memory', color: COLORS[1]!, values: hist.mem },
          ]}
        />
        {hist.vram.length > 0 && (
          <Chart
            title="GPU memory (%) and temperature (°C)"
            span={SAMPLES * SAMPLE_SECONDS}
            times={hist.t}
            series={[
              ...hist.vram.map((v, i) => ({ label: `VRAM ${i}`, color: COLORS[i % 4]!, values: v })),
              ...hist.temp.map((v, i) => ({ label: `Temp ${i}`, color: COLORS[(i + 2) % 4]!, values: v })),
            ]}
          />
        )}
      </div>
    </section>
  );
}

/** Services whose stop cuts this console off (the proxy, the API) or takes its page away. */
const CUTS_OFF: Record<string, string> = {
  'svc-proxy':
    "Stopping svc-proxy closes the HTTPS front door: every request, this console's included, is refused until it is started again on the appliance (lia service start svc-proxy, or systemctl).",
  'svc-system-api': "Stopping svc-system-api removes the management API this page uses; start it again from the appliance's CLI.",
  'svc-webui': "Stopping svc-webui takes the console's page away for new visits; this tab keeps working, so you can start it again here.",
};

function Services() {
  const services = useLoad(() => json<{ manager: string; services: Service[] }>('/system/services'));
  const [pending, setPending] = useState<{ name: string; action: string } | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState<string | null>(null);

  const run = async (name: string, action: string) => {
    setPending(null);
    setBusy(name);
    setError(null);
    try {
      await request(`/system/services/${name}/${action}`, { body: { force: action === 'stop' && name in CUTS_OFF } });
    } catch (err) {
      setError(err);
    }
    setBusy(null);
    await services.reload();
  };
  const ask = (name: string, action: string) => {
    if (name in CUTS_OFF && action !== 'start') setPending({ name, action });
    else void run(name, action);
  };

  return (
    <section class="card" aria-labelledby="services-title">
      <h2 id="services-title">Services</h2>
      <ErrorPanel error={services.error} what="the services" />
      <ErrorPanel error={error} />
      {services.data && (
        <div class="table-wrap">
          <table>
            <caption class="sr-only">Services and their state</caption>
            <thead>
              <tr>
                <th scope="col">Service</th>
                <th scope="col">State</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {services.data.services.map((s) => (
                <tr key={s.name} data-service={s.name}>
                  <th scope="row">
                    {s.name}
                    <div class="muted">{s.description}</div>
                  </th>
                  <td>
                    <span class={`state ${s.state}`} data-testid="service-state">
                      {s.state}
                    </span>
                    {s.sub_state && s.sub_state !== s.state ? ` (${s.sub_state})` : ''}
                  </td>
                  <td class="actions">
                    {(['start', 'stop', 'restart'] as const).map((a) => (
                      <button
                        key={a}
                        type="button"
                        class="small"
                        disabled={busy === s.name || (a === 'start' && s.state === 'active') || (a === 'stop' && s.state !== 'active')}
                        aria-label={`${a} ${s.name}`}
                        onClick={() => ask(s.name, a)}
                      >
                        {a[0]!.toUpperCase() + a.slice(1)}
                      </button>
                    ))}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <Confirm
        open={pending !== null}
        title={`${pending?.action ?? ''} ${pending?.name ?? ''}?`}
        confirmLabel={pending?.action === 'restart' ? 'Restart' : 'Stop'}
        danger
        onCancel={() => setPending(null)}
        onConfirm={() => pending && void run(pending.name, pending.action)}
      >
        <p>{pending ? CUTS_OFF[pending.name] : ''}</p>
      </Confirm>
    </section>
  );
}

const SERVICE_NAMES = ['svc-proxy', 'svc-certs', 'svc-system-api', 'svc-inference', 'svc-gpu-monitor', 'svc-webui'];

function Logs() {
  const [service, setService] = useState('svc-inference');
  const [lines, setLines] = useState(100);
  const [follow, setFollow] = useState(false);
  const logs = useLoad(
    () => json<{ source: string; lines: { timestamp: string; priority: number; message: string }[] }>(`/system/logs?service=${service}&lines=${lines}`),
    [service, lines],
  );
  const pre = useRef<HTMLPreElement>(null);
  useEffect(() => {
    if (!follow) return;
    const t = setInterval(() => void logs.reload(), 3000);
    return () => clearInterval(t);
  }, [follow, logs.reload]);
  useEffect(() => {
    if (follow && pre.current) pre.current.scrollTop = pre.current.scrollHeight;
  }, [logs.data, follow]);
  return (
    <section class="card" aria-labelledby="logs-title">
      <h2 id="logs-title">Logs</h2>
      <div class="row wrap">
        <label for="log-service">Service</label>
        <select id="log-service" value={service} onChange={(e) => setService(e.currentTarget.value)}>
          {SERVICE_NAMES.map((s) => (
            <option key={s} value={s}>
              {s}
            </option>
          ))}
        </select>
        <label for="log-lines">Lines</label>
        <select id="log-lines" value={lines} onChange={(e) => setLines(Number(e.currentTarget.value))}>
          {[50, 100, 500, 2000].map((n) => (
            <option key={n} value={n}>
              {n}
            </option>
          ))}
        </select>
        <label class="inline">
          <input type="checkbox" checked={follow} onChange={(e) => setFollow(e.currentTarget.checked)} /> Follow
        </label>
        <button type="button" class="small" onClick={() => void logs.reload()}>
          Refresh
        </button>
      </div>
      <ErrorPanel error={logs.error} what="the logs" />
      <pre class="logs" ref={pre} role="log" tabIndex={0} aria-label={`Log lines of ${service}`} data-testid="logs">
        {logs.data?.lines.length === 0 ? 'No lines yet.' : logs.data?.lines.map((l) => `${l.timestamp}  ${l.message}`).join('\n')}
      </pre>
    </section>
  );
}

function NetworkCard() {
  const net = useLoad(() => json<Network>('/system/network'));
  const [name, setName] = useState('');
  const [result, setResult] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const change = async (e: Event) => {
    e.preventDefault();
    setError(null);
    setResult(null);
    try {
      const r = await json<{ hostname: string; certificate: { reissued: boolean; covers_hostname: boolean } }>('/system/network/hostname', {
        body: { hostname: name.trim() },
      });
      setResult(
        `The appliance is now ${r.hostname}.local. ${r.certificate.covers_hostname ? 'Its certificate covers the new name' : 'Its certificate does not cover the new name yet'}${r.certificate.reissued ? ' (a new certificate was issued by the same CA, so nothing needs to be trusted again)' : ''}.`,
      );
      setName('');
      await net.reload();
    } catch (err) {
      setError(err);
    }
  };
  return (
    <section class="card" aria-labelledby="net-title">
      <h2 id="net-title">Network</h2>
      <ErrorPanel error={net.error} what="the network" />
      {net.data && (
        <>
          <p>
            Host name <strong>{net.data.hostname}</strong>; mDNS{' '}
            {net.data.mdns.enabled ? `${net.data.mdns.state ?? 'on'} as ${net.data.mdns.hostname ?? '–'}.local (${net.data.mdns.responder})` : 'off'}
            {net.data.mdns.error ? `: ${net.data.mdns.error}` : ''}.
          </p>
          <ul class="plain">
            {net.data.interfaces.map((i) => (
              <li key={i.name}>
                <strong>{i.name}</strong>
                {i.mac ? ` (${i.mac})` : ''}: {i.addresses.map((a) => `${a.address}/${a.prefix}`).join(', ') || 'no address'}
              </li>
            ))}
          </ul>
        </>
      )}
      <form onSubmit={change}>
        <label for="new-hostname">New host name</label>
        <p class="muted" id="hostname-help">
          One label (letters, digits, hyphens). The appliance then answers as NAME.local and issues a new TLS certificate for it from the same CA; clients that
          use the old name must switch.
        </p>
        <div class="row">
          <input id="new-hostname" aria-describedby="hostname-help" value={name} onInput={(e) => setName(e.currentTarget.value)} spellcheck={false} />
          <button type="submit" disabled={!name.trim()}>
            Change
          </button>
        </div>
      </form>
      {result && <p role="status">{result}</p>}
      <ErrorPanel error={error} />
    </section>
  );
}

function RotateKey() {
  const [asking, setAsking] = useState(false);
  const [key, setKey] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const rotate = async () => {
    setAsking(false);
    setError(null);
    try {
      const before = getKey() ?? '';
      const r = await json<{ key: string }>('/system/api-keys/rotate', { body: {} });
      // Signed in with the master key, the console switches to the new one; a named key that
      // holds keys:admin still works and stays.
      const stillValid = await request('/api/version', { key: before }).then(
        () => true,
        (e: unknown) => !(e instanceof ApiError && e.status === 401),
      );
      if (!stillValid) replaceKey(r.key);
      setKey(r.key);
    } catch (err) {
      setError(err instanceof ApiError ? err : new ApiError(500, String(err)));
    }
  };
  return (
    <section class="card" aria-labelledby="rotate-title">
      <h2 id="rotate-title">Master key</h2>
      <p>
        Rotating replaces the master key at once: every script, client and browser that uses the old key is refused from its next request until it is given the
        new one.
      </p>
      <button type="button" class="danger" onClick={() => setAsking(true)}>
        Rotate the master key
      </button>
      {key && (
        <div class="newkey" role="status">
          <p>
            <strong>The new master key, shown once:</strong>
          </p>
          <code data-testid="new-key">{key}</code> <CopyButton text={key} />
          <p class="muted">
            If you signed in with the master key, this console now uses the new one. <code>lia key show</code> on the appliance prints it again.
          </p>
        </div>
      )}
      <ErrorPanel error={error} />
      <Confirm open={asking} title="Rotate the master key?" confirmLabel="Rotate" danger onCancel={() => setAsking(false)} onConfirm={() => void rotate()}>
        <p>The current master key stops working immediately. Old integrations fail until they use the new key.</p>
      </Confirm>
    </section>
  );
}

export function System() {
  return (
    <main id="main" class="page">
      <h1>System</h1>
      <p class="muted">
        This appliance's host figures over the last ten minutes, its six services with their logs, its network names and its master key. What you change here
        takes effect at once for every client; the same actions are in the management API under <code>/system/</code> (<code>docs/management.md</code>).
      </p>
      <Dashboard />
      <Services />
      <Logs />
      <NetworkCard />
      <RotateKey />
    </main>
  );
}
