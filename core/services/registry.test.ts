import t from 'tap';
import { ServiceRegistry, SERVICE_NAMES } from './registry.js';

t.test('the six services start inactive and follow systemd states', async (t) => {
  const reg = new ServiceRegistry();
  t.same(reg.list().map((s) => s.name), [...SERVICE_NAMES]);
  t.ok(reg.list().every((s) => s.state === 'inactive' && !s.implemented));
  const seen: string[] = [];
  reg.onChange((s) => seen.push(`${s.name}:${s.state}`));
  let started = 0;
  reg.implement('svc-certs', { description: 'certs', start: async () => void started++, stop: async () => undefined });
  t.throws(() => reg.implement('svc-certs', { description: 'x', start: async () => undefined, stop: async () => undefined }), /implemented twice/);
  await reg.startAll();
  t.equal(reg.get('svc-certs').state, 'active');
  await reg.start('svc-certs');
  t.equal(started, 1, 'starting an active service is a no-op');
  await reg.restart('svc-certs');
  t.same(seen, ['svc-certs:activating', 'svc-certs:active', 'svc-certs:deactivating', 'svc-certs:inactive', 'svc-certs:activating', 'svc-certs:active']);
  await t.rejects(reg.start('svc-webui'), /not provided by any enabled plugin/);
});

t.test('a role that fails to start is failed, with its error', async (t) => {
  const reg = new ServiceRegistry();
  reg.implement('svc-inference', { description: 'x', start: async () => Promise.reject(new Error('no backend')), stop: async () => undefined });
  await t.rejects(reg.start('svc-inference'), /no backend/);
  t.match(reg.get('svc-inference'), { state: 'failed', subState: 'failed', lastError: 'no backend' });
});
