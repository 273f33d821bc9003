import t from 'tap';
import { ServiceRegistry } from './registry.js';

const APPLIANCE = ['svc-inference', 'svc-webui', 'svc-proxy', 'svc-gpu-monitor', 'svc-system-api', 'svc-certs'];
const role = (start = async (): Promise<void> => undefined) => ({ start, stop: async () => undefined });

t.test('the listed services start inactive and follow systemd states', async (t) => {
  const reg = new ServiceRegistry(APPLIANCE);
  t.same(
    reg.list().map((s) => s.name),
    APPLIANCE,
  );
  t.ok(reg.list().every((s) => s.state === 'inactive' && !s.implemented));
  const seen: string[] = [];
  reg.onChange((s) => seen.push(`${s.name}:${s.state}`));
  let started = 0;
  t.throws(() => reg.implement('svc-certs', role()), /not declared/);
  reg.declare({ name: 'svc-certs', description: 'certs' }, 'pki');
  t.throws(() => reg.declare({ name: 'svc-certs', description: 'x' }, 'other'), /declared by both "pki" and "other"/);
  reg.implement(
    'svc-certs',
    role(async () => void started++),
  );
  t.throws(() => reg.implement('svc-certs', role()), /implemented twice/);
  t.match(reg.get('svc-certs'), { description: 'certs', required: true, implemented: true });
  await reg.startAll();
  t.equal(reg.get('svc-certs').state, 'active');
  await reg.start('svc-certs');
  t.equal(started, 1, 'starting an active service is a no-op');
  await reg.restart('svc-certs');
  t.same(seen, ['svc-certs:activating', 'svc-certs:active', 'svc-certs:deactivating', 'svc-certs:inactive', 'svc-certs:activating', 'svc-certs:active']);
  await t.rejects(reg.start('svc-webui'), /not provided by any enabled plugin/);
});

t.test('services start in list order, then declaration order, each after those it names', async (t) => {
  const reg = new ServiceRegistry(['a', 'b', 'c']);
  const order: string[] = [];
  for (const [name, after] of [
    ['c', []],
    ['extra', []],
    ['late', ['extra', 'missing']],
    ['a', ['c']],
    ['b', []],
  ] as const) {
    reg.declare({ name, description: name, after }, `plugin-${name}`);
    reg.implement(
      name,
      role(async () => void order.push(name)),
    );
  }
  t.same(reg.names(), ['c', 'a', 'b', 'extra', 'late']);
  await reg.startAll();
  t.same(order, ['c', 'a', 'b', 'extra', 'late']);
  t.ok(reg.has('extra'));
  t.notOk(reg.has('missing'));
  t.equal(reg.declaredBy('late'), 'plugin-late');
  t.throws(() => reg.declare({ name: 'Bad Name', description: 'x' }, 'p'), /lower case/);
});

t.test('a role that fails to start is failed, with its error', async (t) => {
  const reg = new ServiceRegistry(APPLIANCE);
  reg.declare({ name: 'svc-inference', description: 'x' }, 'engine');
  reg.implement(
    'svc-inference',
    role(async () => Promise.reject(new Error('no backend'))),
  );
  await t.rejects(reg.start('svc-inference'), /no backend/);
  t.match(reg.get('svc-inference'), { state: 'failed', subState: 'failed', lastError: 'no backend' });
});
