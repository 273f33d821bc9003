#!/usr/bin/env node
// The `lia` command. It runs the JavaScript that `npm run build` (run by `npm install` through
// `prepare`) transpiles into dist/: no TypeScript loader in the serving process keeps its memory
// down. From a checkout without dist/, or with LIA_FROM_SOURCE=1, it runs the TypeScript sources
// through tsx instead.
import { existsSync } from 'node:fs';

// libuv sizes its thread pool on first use, so this must run before any asynchronous file I/O:
// transformers.js passes, crypto and file work would otherwise share 4 threads.
process.env.UV_THREADPOOL_SIZE ??= '16';

const dist = new URL('../dist/core/cli/main.js', import.meta.url);
let main;
if (process.env.LIA_FROM_SOURCE !== '1' && existsSync(dist)) {
  ({ main } = await import(dist.href));
} else {
  const { register } = await import('tsx/esm/api');
  register();
  ({ main } = await import('../core/cli/main.ts'));
}
process.exitCode = await main(process.argv.slice(2));
