import t from 'tap';
import { table } from './table.js';

t.test('table: columns as wide as their widest cell, the gap between them, no trailing spaces', async (t) => {
  const rows = [
    ['NAME', 'SIZE', 'MODIFIED'],
    ['stories:latest', '1.2 MB', ''],
    ['a', '12 GB', 'yesterday'],
  ];
  t.equal(table(rows), 'NAME              SIZE      MODIFIED\nstories:latest    1.2 MB\na                 12 GB     yesterday\n');
  t.equal(table(rows, 2), 'NAME            SIZE    MODIFIED\nstories:latest  1.2 MB\na               12 GB   yesterday\n');
  t.equal(table([]), '');
});
