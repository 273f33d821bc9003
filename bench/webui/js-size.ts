/**
 * The JavaScript a browser downloads for the web console, against two other local-LLM web UIs:
 * llama.cpp's own `llama-server` UI (Svelte, from the llama.cpp release node-llama-cpp bundles) and
 * Open WebUI (SvelteKit). Every figure is gzip level 9 (`node:zlib`) of the built files, whatever
 * the builds precompress themselves.
 *
 *   node --conditions=lia-source --import tsx bench/webui/js-size.ts [--open-webui DIR]
 *
 * "First load" is what opening a page fetches before it can draw: the scripts and module preloads
 * of the built `index.html` (and the `import()`s of its inline script), every module they import
 * statically, and the page's own lazily imported chunk with its static imports (LIA: one chunk per
 * page, by file name; SvelteKit: the root layout, the route's layouts and its page node, read from
 * `.svelte-kit/generated`). "All JS" is every `.js`/`.mjs` file in the build. Chunks no page needs
 * at first load (LIA's chart library) are listed apart.
 *
 * Builds: LIA's `dist/webui/` (`npm run build` when missing). The peers are built once into
 * `bench/.cache/peer-ui/` (git-ignored): `llama-ui/` from the llama.cpp source of
 * `bench/engine/llama-server.ts` (`npm ci`, then its own `npm run build`), `open-webui/` from a
 * checkout given with `--open-webui DIR` (`npm ci --ignore-scripts`, then
 * `vite build`: its `pyodide:fetch` step, which downloads Python packages from outside the npm
 * registry, is skipped; they are Python wheels for its code interpreter, not JavaScript a page
 * loads at first).
 *
 * @module
 */
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { gzipSync } from 'node:zlib';
import { llamaCppSource } from '../engine/llama-server.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CACHE = path.join(ROOT, 'bench/.cache/peer-ui');
/** Written into a peer's cache directory: the commit its build came from. */
const STAMP = '.lia-commit';

const { values: args } = parseArgs({ options: { 'open-webui': { type: 'string' } } });

function sh(cmd: string, argv: string[], cwd: string): string {
  return execFileSync(cmd, argv, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 64 << 20 });
}

/** Runs a build step with its output on stderr, so stdout stays the Markdown report. */
function step(cmd: string, argv: string[], cwd: string, env: Record<string, string> = {}): void {
  console.error(`$ (${path.relative(ROOT, cwd) || '.'}) ${cmd} ${argv.join(' ')}`);
  execFileSync(cmd, argv, { cwd, stdio: ['ignore', process.stderr, process.stderr], env: { ...process.env, ...env } });
}

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    return statSync(full).isDirectory() ? walk(full) : [full];
  });
}

const gzCache = new Map<string, number>();
function gzip(file: string): number {
  let n = gzCache.get(file);
  if (n === undefined) gzCache.set(file, (n = gzipSync(readFileSync(file), { level: 9 }).length));
  return n;
}

/** A built web UI: its output directory and the URL prefix its `index.html` uses for it. */
interface Build {
  dir: string;
  base: string;
}

/** Module specifiers of static `import`/`export ... from` statements, and of `import()` calls. */
function imports(code: string): { statics: string[]; dynamics: string[] } {
  const statics = [
    ...code.matchAll(/(?<![\w$.])(?:import|export)\s*(?:[\w$]+\s*,?\s*)?(?:\*\s*as\s*[\w$]+|\*|\{[^}]*\})?\s*(?:from\s*)?["']([^"'\n]+\.m?js)["']/g),
  ].map((m) => m[1]!);
  // Minifiers may write an `import()` argument as a template literal.
  const dynamics = [...code.matchAll(/(?<![\w$.])import\(\s*["'`]([^"'`$\n]+\.m?js)["'`]\s*\)/g)].map((m) => m[1]!);
  return { statics, dynamics };
}

/** The file a specifier names, relative to the importing file or to the build's base URL. */
function resolve(build: Build, from: string, spec: string): string | undefined {
  if (/^[a-z]+:/i.test(spec)) return undefined;
  const file = spec.startsWith('/')
    ? path.join(build.dir, spec.startsWith(build.base) ? spec.slice(build.base.length) : spec)
    : path.resolve(path.dirname(from), spec);
  return existsSync(file) ? file : undefined;
}

/** `files` and every module they import statically, transitively. */
function closure(build: Build, files: Iterable<string>): Set<string> {
  const seen = new Set<string>();
  const todo = [...files];
  while (todo.length > 0) {
    const file = todo.pop()!;
    if (seen.has(file)) continue;
    seen.add(file);
    for (const spec of imports(readFileSync(file, 'utf8')).statics) {
      const dep = resolve(build, file, spec);
      if (dep && !seen.has(dep)) todo.push(dep);
    }
  }
  return seen;
}

/** What `index.html` loads: module scripts, module preloads and its inline script's imports. */
function htmlEntries(build: Build): string[] {
  const from = path.join(build.dir, 'index.html');
  const html = readFileSync(from, 'utf8');
  const specs = [
    ...[...html.matchAll(/<script[^>]*\ssrc="([^"]+)"/g)].map((m) => m[1]!),
    ...[...html.matchAll(/<link[^>]*rel="modulepreload"[^>]*>/g)].map((m) => /href="([^"]+)"/.exec(m[0])?.[1] ?? ''),
    ...[...html.matchAll(/<script(?![^>]*\ssrc=)[^>]*>([\s\S]*?)<\/script>/g)].flatMap((m) => imports(m[1]!).dynamics),
  ];
  return specs.map((s) => resolve(build, from, s)).filter((f): f is string => f !== undefined && /\.m?js$/.test(f));
}

function allJs(build: Build): string[] {
  return walk(build.dir).filter((f) => /\.m?js$/.test(f));
}

function total(files: Iterable<string>): number {
  let n = 0;
  for (const f of files) n += gzip(f);
  return n;
}

/**
 * The route nodes SvelteKit loads for `route`: the root layout (node 0), the route's own layouts
 * and its page, from the generated client manifest, as built files under `_app/immutable/nodes/`.
 * None when the app is built as one bundle.
 */
function svelteKitNodes(project: string, build: Build, route: string): string[] {
  const nodesDir = path.join(build.dir, '_app/immutable/nodes');
  if (!existsSync(nodesDir)) return [];
  const app = readFileSync(path.join(project, '.svelte-kit/generated/client-optimized/app.js'), 'utf8');
  const entry = new RegExp(`"${route.replace(/[/()[\]]/g, '\\$&')}":\\s*\\[([^\\]]*(?:\\[[^\\]]*\\])?[^\\]]*)\\]`).exec(app);
  if (!entry) throw new Error(`route ${route} not in ${project}'s SvelteKit manifest`);
  const ids = [0, ...[...entry[1]!.matchAll(/~?(\d+)/g)].map((m) => Number(m[1]))];
  const files = readdirSync(nodesDir);
  return [...new Set(ids)].map((id) => {
    const name = files.find((f) => f.startsWith(`${id}.`) && f.endsWith('.js'));
    if (!name) throw new Error(`node ${id} missing in ${nodesDir}`);
    return path.join(nodesDir, name);
  });
}

interface Measure {
  ui: string;
  page: string;
  firstLoad: Set<string>;
  all: string[];
}

/** LIA's console: the entry (sign-in), then each page as the entry plus the page's chunk. */
async function measureLia(): Promise<{ pages: Measure[]; lazy: string[] }> {
  const build: Build = { dir: path.join(ROOT, 'dist/webui'), base: '/ui/' };
  if (!existsSync(path.join(build.dir, 'index.html'))) step('npm', ['run', 'build'], ROOT);
  const all = allJs(build);
  const entry = closure(build, htmlEntries(build));
  const pageChunks = new Map<string, string>();
  for (const file of entry) {
    for (const spec of imports(readFileSync(file, 'utf8')).dynamics) {
      const chunk = resolve(build, file, spec);
      const page = chunk && /^(Chat|Models|System|Keys)-/.exec(path.basename(chunk))?.[1];
      if (chunk && page) pageChunks.set(page.toLowerCase(), chunk);
    }
  }
  const pages: Measure[] = [{ ui: 'LIA', page: 'sign-in', firstLoad: entry, all }];
  for (const page of ['chat', 'models', 'system', 'keys']) {
    const chunk = pageChunks.get(page);
    if (!chunk) throw new Error(`no chunk for the ${page} page among the entry's dynamic imports`);
    pages.push({ ui: 'LIA', page, firstLoad: new Set([...entry, ...closure(build, [chunk])]), all });
  }
  const used = new Set(pages.flatMap((p) => [...p.firstLoad]));
  return { pages, lazy: all.filter((f) => !used.has(f)) };
}

/** llama.cpp's UI, copied from the llama.cpp source and built with its own build script. */
async function measureLlamaUi(): Promise<Measure & { commit: string; version: string }> {
  const project = path.join(CACHE, 'llama-ui');
  const build: Build = { dir: path.join(project, 'dist'), base: '/' };
  if (!existsSync(path.join(build.dir, 'index.html'))) {
    const src = await llamaCppSource();
    rmSync(project, { recursive: true, force: true });
    cpSync(path.join(src, 'tools/ui'), project, { recursive: true });
    writeFileSync(path.join(project, STAMP), sh('git', ['rev-parse', 'HEAD'], src).trim());
    step('npm', ['ci', '--no-audit', '--no-fund'], project);
    step('npm', ['run', 'build'], project);
  }
  const commit = (await readFile(path.join(project, STAMP), 'utf8').catch(() => 'unknown')).trim();
  // The UI's package.json says 1.0.0 whatever the release; the llama.cpp tag names it.
  const info = JSON.parse(readFileSync(path.join(ROOT, 'node_modules/node-llama-cpp/llama/llama.cpp.info.json'), 'utf8')) as { tag: string };
  const version = `llama.cpp ${info.tag}`;
  const firstLoad = closure(build, [...htmlEntries(build), ...svelteKitNodes(project, build, '/')]);
  return { ui: 'llama-server UI', page: 'chat (/)', firstLoad, all: allJs(build), commit, version };
}

/** Open WebUI's frontend, copied from a checkout (`--open-webui DIR`) and built with `vite build`. */
async function measureOpenWebUi(): Promise<(Measure & { commit: string; version: string }) | undefined> {
  const project = path.join(CACHE, 'open-webui');
  const build: Build = { dir: path.join(project, 'build'), base: '/' };
  if (!existsSync(path.join(build.dir, 'index.html'))) {
    const checkout = args['open-webui'];
    if (!checkout) {
      console.error(
        'Open WebUI is not built: pass --open-webui DIR, a checkout of its repository (the frontend is copied and built under bench/.cache/peer-ui/open-webui)',
      );
      return undefined;
    }
    if (path.resolve(checkout) !== project) {
      rmSync(project, { recursive: true, force: true });
      // The frontend only: the Python backend, history and any earlier build stay behind.
      cpSync(checkout, project, { recursive: true, filter: (f) => !/^(\.git|node_modules|backend|build|\.svelte-kit)$/.test(path.relative(checkout, f)) });
      const commit = existsSync(path.join(checkout, '.git')) ? sh('git', ['rev-parse', 'HEAD'], checkout).trim() : 'unknown (not a git checkout)';
      writeFileSync(path.join(project, STAMP), commit);
    }
    // Without install scripts: Cypress (its end-to-end tests) and onnxruntime-node (server-side
    // inference) download binaries from outside the npm registry; the frontend build needs neither.
    step('npm', ['ci', '--no-audit', '--no-fund', '--ignore-scripts'], project);
    // `npm run build` first runs `pyodide:fetch` (Python wheels from outside the npm registry).
    // A large build (6,300 modules, minutes): 6 GiB of heap, as it was measured with.
    step('npx', ['vite', 'build'], project, { NODE_OPTIONS: '--max-old-space-size=6144' });
  }
  const commit = (await readFile(path.join(project, STAMP), 'utf8').catch(() => 'unknown')).trim();
  const version = JSON.parse(readFileSync(path.join(project, 'package.json'), 'utf8')).version as string;
  // Its chat page: the route `/(app)` (the URL `/` inside the signed-in layout group).
  const firstLoad = closure(build, [...htmlEntries(build), ...svelteKitNodes(project, build, '/(app)')]);
  return { ui: 'Open WebUI', page: 'chat (/)', firstLoad, all: allJs(build), commit, version };
}

const kib = (n: number): string => `${(n / 1024).toFixed(1)} KiB`;
const ratio = (a: number, b: number): string => (a / b < 0.1 ? (a / b).toFixed(3) : (a / b).toFixed(2));

const lia = await measureLia();
const peers = [await measureLlamaUi(), await measureOpenWebUi()].filter((p) => p !== undefined);
const liaChat = lia.pages.find((p) => p.page === 'chat')!;
const liaAll = total(liaChat.all);

console.log(`| UI | page | first-load JS (gzip) | files at first load | all JS (gzip) | JS files | LIA ÷ UI, first load | LIA ÷ UI, all JS |`);
console.log('|---|---|---|---|---|---|---|---|');
for (const m of [...lia.pages, ...peers]) {
  const first = total(m.firstLoad);
  const all = total(m.all);
  const peer = m.ui !== 'LIA';
  console.log(
    `| ${m.ui} | ${m.page} | ${first.toLocaleString('en')} B (${kib(first)}) | ${m.firstLoad.size} | ${all.toLocaleString('en')} B (${kib(all)}) | ${m.all.length} | ${peer ? ratio(total(liaChat.firstLoad), first) : ''} | ${peer ? ratio(liaAll, all) : ''} |`,
  );
}
console.log('');
console.log(`LIA's chunks no page loads at first: ${lia.lazy.map((f) => `\`${path.basename(f)}\` ${gzip(f).toLocaleString('en')} B`).join(', ') || 'none'}.`);
console.log(`Ratios compare LIA's chat page with each peer's chat page.`);
for (const p of peers) console.log(`${p.ui}: version ${p.version}, commit ${p.commit}.`);
