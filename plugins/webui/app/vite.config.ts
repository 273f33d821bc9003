/**
 * Build of the web console: Vite bundles `src/` with Preact into `dist/webui/` at the project
 * root (`npm run build` runs it after the server build). Every asset name carries a content hash,
 * so the plugin serves them as immutable; the compress step writes `.gz` and `.br` beside each
 * text file so the server never compresses at request time.
 */
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import preact from '@preact/preset-vite';
import { defineConfig, type Plugin } from 'vite';

const here = path.dirname(fileURLToPath(import.meta.url));
const outDir = path.resolve(here, '../../../dist/webui');

/** Files smaller than this are not worth compressing (bytes). */
const MIN_COMPRESS = 512;

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    return statSync(full).isDirectory() ? walk(full) : [full];
  });
}

/** Writes `name.gz` (level 9) and `name.br` (quality 11) beside every text asset. */
function precompress(): Plugin {
  return {
    name: 'lia-precompress',
    apply: 'build',
    closeBundle() {
      for (const file of walk(outDir)) {
        if (!/\.(js|css|html|svg|json|txt|map)$/.test(file)) continue;
        const data = readFileSync(file);
        if (data.length < MIN_COMPRESS) continue;
        writeFileSync(`${file}.gz`, gzipSync(data, { level: 9 }));
        writeFileSync(
          `${file}.br`,
          brotliCompressSync(data, { params: { [constants.BROTLI_PARAM_QUALITY]: 11, [constants.BROTLI_PARAM_SIZE_HINT]: data.length } }),
        );
      }
    },
  };
}

export default defineConfig({
  root: here,
  base: '/ui/',
  plugins: [preact(), precompress()],
  logLevel: 'warn',
  build: {
    outDir,
    emptyOutDir: true,
    target: 'es2022',
    // Nothing inlined as data: URLs; the CSP allows only files of this origin.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    sourcemap: false,
    reportCompressedSize: false,
    // esbuild (a dependency of the server build) minifies the CSS, so the build needs no further native module.
    cssMinify: 'esbuild',
  },
});
