/**
 * The environment runners start with for transparent huge pages (huge-pages.ts); memory.model.test.ts
 * checks a real runner's environment and pages.
 */
import t from 'tap';
import { runnerTunables } from '../../plugins/backend-llama-cpp/huge-pages.js';

t.test('huge pages: the glibc tunable is added, never forced over the operator', async (t) => {
  t.equal(runnerTunables('auto', undefined), 'glibc.malloc.hugetlb=1');
  t.equal(runnerTunables('auto', ''), 'glibc.malloc.hugetlb=1');
  t.equal(runnerTunables('auto', 'glibc.malloc.arena_max=2'), 'glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1', 'other tunables kept');
  t.equal(runnerTunables('auto', 'glibc.malloc.hugetlb=0'), 'glibc.malloc.hugetlb=0', "the operator's own setting wins");
  t.equal(runnerTunables('off', undefined), undefined, 'off: nothing set');
  t.equal(runnerTunables('off', 'glibc.malloc.arena_max=2'), 'glibc.malloc.arena_max=2', 'off: the parent environment as it is');
});
