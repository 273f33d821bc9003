/**
 * `lia engine build`: builds llama-server from the llama.cpp source node-llama-cpp ships (see
 * build.ts), with a progress display: on a terminal one bar redrawn in place (steps done of the
 * build's total, and the time so far), elsewhere a line per step and one per tenth of the compile.
 * A local command: it needs no running appliance.
 *
 * @module
 */
import { CliError, type CliCommand, type CliIO } from 'lia/plugin';
import { buildLlamaServer, BuildError, cacheRoot, cachedBinary, leftOutVariants, type BuildProgress } from './build.js';
import { probeBinary } from './probe.js';

/** Draws {@link BuildProgress} on `out`. */
export function progressPrinter(out: CliIO['stdout']): { report: (p: BuildProgress) => void; end: () => void } {
  const tty = out.isTTY === true;
  const started = Date.now();
  let barShown = false;
  let lastTenth = -1;
  const elapsed = () => {
    const s = Math.round((Date.now() - started) / 1000);
    return s < 60 ? `${s}s` : `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  };
  const endBar = () => {
    if (barShown) out.write('\n');
    barShown = false;
  };
  return {
    report(p) {
      if (p.kind === 'step') {
        endBar();
        out.write(`${p.text}\n`);
        return;
      }
      const fraction = p.total > 0 ? p.done / p.total : 0;
      if (tty) {
        const width = Math.max(10, Math.min(40, (out.columns ?? 80) - 40));
        const filled = Math.round(fraction * width);
        out.write(`\r\x1b[2Kcompiling [${'#'.repeat(filled)}${' '.repeat(width - filled)}] ${p.done}/${p.total} ${elapsed()}`);
        barShown = true;
        return;
      }
      const tenth = Math.floor(fraction * 10);
      if (tenth > lastTenth) {
        lastTenth = tenth;
        out.write(`compiling: ${Math.round(fraction * 100)}% (${p.done}/${p.total}, ${elapsed()})\n`);
      }
    },
    end: endBar,
  };
}

export const engineCommands = (): CliCommand[] => [
  {
    name: 'engine build',
    summary: "Build llama.cpp's llama-server (the backend-llama-server engine) from the bundled llama.cpp source",
    usage: 'lia engine build [--jobs N] [--check]',
    options: { jobs: { type: 'string', short: 'j' }, check: { type: 'boolean' } },
    async run(args, io) {
      if (args.values['check']) {
        // The binary's path on stdout (the Debian package's build reads it); the probe on stderr.
        const binary = await cachedBinary(io.env);
        if (!binary) throw new CliError('llama-server is not built; run `lia engine build`');
        const probe = await probeBinary(binary, cacheRoot(io.env));
        if (!probe.ok) throw new CliError(`${binary}: ${probe.message}; GGUF models run on node-llama-cpp`);
        for (const { variant, signal } of leftOutVariants(io.env))
          io.stderr.write(`llama-server: ${variant} left out of this build (it died of ${signal} here)\n`);
        io.stderr.write(`llama-server: ${probe.message}\n`);
        io.stdout.write(`${binary}\n`);
        return 0;
      }
      const jobs = args.values['jobs'] === undefined ? undefined : Number(args.values['jobs']);
      if (jobs !== undefined && !(Number.isInteger(jobs) && jobs > 0)) throw new CliError(`--jobs must be a positive integer\nUsage: ${this.usage}`, 2);
      const view = progressPrinter(io.stdout);
      try {
        const binary = await buildLlamaServer({ env: io.env, onProgress: view.report, ...(jobs ? { jobs } : {}) });
        view.end();
        io.stdout.write(`llama-server: ${binary}\n`);
        return 0;
      } catch (err) {
        view.end();
        if (err instanceof BuildError) throw new CliError(err.message);
        throw err;
      }
    },
  },
];
