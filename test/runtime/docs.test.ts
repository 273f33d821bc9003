/**
 * The documentation tables stay true: every registered error code is in docs/errors.md with its
 * status, and every core setting is in docs/configuration.md with its variable.
 */
import { readdir, readFile } from 'node:fs/promises';
import t from 'tap';
import { SETTINGS } from '../../core/config/schema.js';
import { registeredErrors } from '../../core/errors.js';
import { projectPath } from '../../core/paths.js';

t.test('docs/errors.md lists every error code with its status', async (t) => {
  for (const dir of await readdir(projectPath('plugins'))) await import(projectPath('plugins', dir, 'index.ts'));
  const doc = await readFile(projectPath('docs', 'errors.md'), 'utf8');
  t.ok(registeredErrors().size >= 19);
  for (const [code, { statusCode }] of registeredErrors()) {
    t.match(doc, new RegExp(`\\| \`${code}\` \\| ${statusCode} \\|`), code);
  }
});

t.test('docs/configuration.md lists every core setting', async (t) => {
  const doc = await readFile(projectPath('docs', 'configuration.md'), 'utf8');
  for (const s of SETTINGS) t.match(doc, new RegExp(`\\| \`${s.key}\` \\| \`${s.env}\``), s.key);
});
