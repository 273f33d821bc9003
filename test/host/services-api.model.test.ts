/**
 * `/system/services` in the embedded default, through the real HTTPS server with every plugin:
 * the list, the three ways to send an action, the errors a user can make, the lock-out guard
 * (409 unless forced), 202-then-act for the API itself, and what stopping a service does to the
 * user: inference answers 503 (models unloaded), the web UI goes away, then both come back.
 */
import t from 'tap';
import { startTestAppliance } from '../helpers/appliance.js';
import { createModel } from '../helpers/models.js';
import { waitFor } from '../helpers/wait.js';

/** The interface's six services, in the start order of the shipped configuration. */
const SERVICE_NAMES = ['svc-inference', 'svc-webui', 'svc-proxy', 'svc-gpu-monitor', 'svc-system-api', 'svc-certs'];

interface ServiceEntry {
  name: string;
  description: string;
  state: string;
  sub_state: string;
  since: string | null;
  main_pid: number | null;
  enabled: boolean;
}

t.test('embedded service management', async (t) => {
  const app = await startTestAppliance({ plugins: { 'host-network': { options: { mdns: 'off' } } } });
  t.teardown(() => app.close());
  const post = (p: string, body?: unknown) =>
    app.fetch(p, { method: 'POST', body: body === undefined ? undefined : JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  const services = async (): Promise<ServiceEntry[]> => ((await (await app.fetch('/system/services')).json()) as { services: ServiceEntry[] }).services;
  const service = async (name: string): Promise<ServiceEntry> => (await services()).find((s) => s.name === name)!;

  t.test('the six services with state, sub-state, since, main PID and enablement', async (t) => {
    const res = await app.fetch('/system/services');
    t.equal(res.status, 200);
    const body = (await res.json()) as { manager: string; services: ServiceEntry[] };
    t.equal(body.manager, 'embedded');
    t.same(
      body.services.map((s) => s.name),
      SERVICE_NAMES,
    );
    for (const s of body.services) {
      t.match(s, { state: 'active', sub_state: 'running', main_pid: process.pid, enabled: true }, s.name);
      t.ok(s.since && !Number.isNaN(Date.parse(s.since)), `${s.name} since is a date`);
      t.type(s.description, 'string');
    }
    t.equal((await app.fetch('/system/services', { auth: false })).status, 401);
  });

  t.test('the action as a body, a query or a path segment', async (t) => {
    const stop = await post('/system/services/svc-gpu-monitor/', { action: 'stop' });
    t.equal(stop.status, 200);
    t.match(await stop.json(), { service: 'svc-gpu-monitor', action: 'stop', status: 'done', state: { state: 'inactive', sub_state: 'dead', main_pid: null } });
    const start = await post('/system/services/svc-gpu-monitor?action=start');
    t.equal(start.status, 200);
    t.match(await start.json(), { state: { state: 'active' } });
    const before = (await service('svc-gpu-monitor')).since!;
    await new Promise((r) => setTimeout(r, 5));
    const restart = await post('/system/services/svc-gpu-monitor/restart');
    t.equal(restart.status, 200);
    const after = await service('svc-gpu-monitor');
    t.equal(after.state, 'active');
    t.ok(Date.parse(after.since!) > Date.parse(before), 'since moved on restart');
  });

  t.test('mistakes are clear 4xx answers', async (t) => {
    const cases: [string, unknown, number, RegExp][] = [
      ['/system/services/svc-nope/', { action: 'start' }, 404, /no such service "svc-nope"/],
      ['/system/services/ssh/restart', undefined, 404, /no such service/],
      ['/system/services/svc-webui/', { action: 'reload' }, 400, /unknown action "reload"/],
      ['/system/services/svc-webui/', undefined, 400, /missing action/],
      ['/system/services/svc-webui/', {}, 400, /missing action/],
      ['/system/services/svc-webui/stop', { action: 'start' }, 400, /conflicting actions/],
      ['/system/services/svc-webui/', 'stop', 400, /JSON object/],
      ['/system/services/svc-webui/', { action: 7 }, 400, /must be a string/],
      ['/system/services/svc-webui/', { action: 'stop', force: 'yes' }, 400, /"force" must be true or false/],
    ];
    for (const [url, body, status, message] of cases) {
      const res = await post(url, body);
      t.equal(res.status, status, `${url} ${JSON.stringify(body)}`);
      t.match(await res.json(), { error: message });
    }
    const bad = await app.fetch('/system/services/svc-webui/', { method: 'POST', body: '{"action":', headers: { 'content-type': 'application/json' } });
    t.equal(bad.status, 400, 'broken JSON');
    const get = await app.fetch('/system/services/svc-webui/restart');
    t.equal(get.status, 405);
    t.equal(get.headers.get('allow'), 'POST');
  });

  t.test('stopping the API or the proxy is refused unless forced', async (t) => {
    for (const name of ['svc-system-api', 'svc-proxy']) {
      const res = await post(`/system/services/${name}/stop`);
      t.equal(res.status, 409, name);
      t.match(await res.json(), { error: /"force": true/ });
      t.equal((await service(name)).state, 'active', `${name} still active`);
    }
  });

  t.test('a forced stop of the API answers 202, then the API is away until started', async (t) => {
    const res = await post('/system/services/svc-system-api/', { action: 'stop', force: true });
    t.equal(res.status, 202);
    t.match(await res.json(), { service: 'svc-system-api', action: 'stop', status: 'accepted' });
    // The stop runs after the answer: wait for it instead of guessing how long it takes.
    const status = await waitFor('the API to stop', async () => {
      const res = await app.fetch('/system/status');
      return res.status === 503 ? res : (await res.text(), false);
    });
    t.match(await status.json(), { error: /svc-system-api is stopped/ });
    const start = await post('/system/services/svc-system-api/start');
    t.equal(start.status, 200);
    t.equal((await app.fetch('/system/status')).status, 200);
  });

  t.test('restarting the API answers 202 first, then restarts it', async (t) => {
    const before = (await service('svc-system-api')).since!;
    const res = await post('/system/services/svc-system-api/restart');
    t.equal(res.status, 202);
    t.equal(res.headers.get('location'), '/system/services');
    await res.text();
    const after = await waitFor('the API to come back restarted', async () => {
      const r = await app.fetch('/system/services');
      if (r.status !== 200) return (await r.text(), false);
      const since = ((await r.json()) as { services: ServiceEntry[] }).services.find((s) => s.name === 'svc-system-api')!.since!;
      return since !== before && since;
    });
    t.not(after, before, 'it was restarted after the answer');
    t.equal((await service('svc-system-api')).state, 'active');
  });

  t.test('stopping svc-inference unloads the models and makes inference answer 503', async (t) => {
    await createModel(app, 'stories', 'gguf/stories260K.gguf');
    const gen = await post('/api/generate', { model: 'stories', prompt: 'Once', stream: false, options: { num_predict: 4 } });
    t.equal(gen.status, 200);
    await gen.text();
    const ps = (await (await app.fetch('/api/ps')).json()) as { models: unknown[] };
    t.equal(ps.models.length, 1, 'the model is loaded');
    t.equal((await post('/system/services/svc-inference/stop')).status, 200);
    t.same(((await (await app.fetch('/api/ps')).json()) as { models: unknown[] }).models, [], 'models unloaded');
    const native = await post('/api/generate', { model: 'stories', prompt: 'Once', stream: false });
    t.equal(native.status, 503);
    t.match(await native.json(), { error: /svc-inference is stopped/ });
    const openai = await post('/v1/chat/completions', { model: 'stories', messages: [{ role: 'user', content: 'hi' }] });
    t.equal(openai.status, 503);
    t.match(await openai.json(), { error: { message: /svc-inference is stopped/, type: 'service_unavailable_error' } });
    t.equal((await post('/system/services/svc-inference/start')).status, 200);
    // Back: the request reaches model resolution again (a 404 for an unknown model, not a 503).
    const again = await post('/api/generate', { model: 'no-such-model', prompt: 'Once', stream: false });
    t.equal(again.status, 404, 'inference answers again after start');
    await again.text();
  });

  t.test('restarting svc-certs re-checks the certificate and keeps serving it', async (t) => {
    const res = await post('/system/services/svc-certs/restart');
    t.equal(res.status, 200);
    t.match(await res.json(), { state: { state: 'active' } });
    t.equal((await app.fetch('/system/ca-cert', { auth: false })).status, 200);
  });

  t.test('stopping svc-webui takes the web UI away; starting brings it back', async (t) => {
    t.equal((await app.fetch('/ui/', { auth: false })).status, 200);
    t.equal((await post('/system/services/svc-webui/stop')).status, 200);
    t.equal((await app.fetch('/ui/', { auth: false })).status, 503);
    t.equal((await post('/system/services/svc-webui/start')).status, 200);
    t.equal((await app.fetch('/ui/', { auth: false })).status, 200);
  });
});

t.test('a service no enabled plugin provides cannot be started', async (t) => {
  const app = await startTestAppliance({
    plugins: {
      'host-gpu': false,
      'host-network': { options: { mdns: 'off' } },
      'model-store': false,
      'backend-llama-cpp': false,
      'backend-transformers': false,
      engine: false,
      gguf: false,
      'backend-llama-server': false,
      'api-openai': false,
      'api-anthropic': false,
    },
  });
  t.teardown(() => app.close());
  const list = ((await (await app.fetch('/system/services')).json()) as { services: ServiceEntry[] }).services;
  t.match(
    list.find((s) => s.name === 'svc-gpu-monitor'),
    { state: 'inactive', sub_state: 'not-provided', enabled: false, main_pid: null },
  );
  const res = await app.fetch('/system/services/svc-gpu-monitor/start', { method: 'POST' });
  t.equal(res.status, 409);
  t.match(await res.json(), { error: /no enabled plugin provides it/ });
});
