#!/usr/bin/env node
// The `lia` command. It runs the JavaScript that `npm run build` (run by `npm install` through
// `prepare`) transpiles into dist/: no TypeScript loader in the serving process keeps its memory
// down. From a checkout without dist/, or with LIA_FROM_SOURCE=1, it runs the TypeScript sources
// through tsx instead (with the `lia-source` export condition, so that `lia/plugin` is the sources too).
import { existsSync } from 'node:fs';

// libuv sizes its thread pool on first use, so this must run before any asynchronous file I/O:
// transformers.js passes, crypto and file work would otherwise share 4 threads.
process.env.UV_THREADPOOL_SIZE ??= '16';

// `lia list | head`: a reader that stops early is not an error.
process.stdout.on('error', (err) => {
  if (err.code === 'EPIPE') process.exit(0);
  throw err;
});

const dist = new URL('../dist/core/cli/main.js', import.meta.url);
let main;
if (process.env.LIA_FROM_SOURCE !== '1' && existsSync(dist)) {
  ({ main } = await import(dist.href));
} else {
  // Built-in plugins import core as `lia/plugin`, which resolves to dist/ unless the `lia-source`
  // condition asks for the TypeScript sources: add it, then let tsx load them.
  const { register: registerHooks } = await import('node:module');
  registerHooks('data:text/javascript,export function resolve(s, c, next) { return next(s, { ...c, conditions: [...c.conditions, "lia-source"] }) }');
  const { register } = await import('tsx/esm/api');
  register();
  ({ main } = await import('../core/cli/main.ts'));
}
process.exitCode = await main(process.argv.slice(2));
