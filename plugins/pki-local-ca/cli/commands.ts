/**
 * `lia ca fingerprint` and `lia ca export`: the root CA of the local appliance (from its data
 * directory) or, with `--url`, of a remote one. A remote certificate is fetched without
 * verification — it is what is being verified: compare the printed fingerprint with the one on
 * the appliance's console before trusting it.
 *
 * @module
 */
import { X509Certificate } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { Agent, fetch } from 'undici';
import { CliError, isCliError, type CliArgs, type CliIO, type CliCommand } from 'lia/plugin';

async function rootPem(args: CliArgs, io: CliIO): Promise<string> {
  const url = args.values['url'] as string | undefined;
  if (url) {
    const dispatcher = new Agent({ connect: { rejectUnauthorized: false } });
    try {
      const res = await fetch(`${url.replace(/\/+$/, '')}/system/ca-cert`, { dispatcher });
      if (!res.ok) throw new CliError(`${url} answered ${res.status}`);
      return await res.text();
    } catch (err) {
      if (isCliError(err)) throw err;
      throw new CliError(`cannot reach ${url}: ${(err as Error).message}`);
    } finally {
      await dispatcher.close();
    }
  }
  const file = `${io.dataDir}/pki/root.crt`;
  return readFile(file, 'utf8').catch(() => {
    throw new CliError(`no CA at ${file}: start the appliance once ("lia serve"), or pass --url https://HOST:8443`);
  });
}

export const commands: CliCommand[] = [
  {
    name: 'ca fingerprint',
    summary: "Print the root CA's SHA-256 fingerprint (compare it with the console's)",
    usage: 'lia ca fingerprint [--url https://HOST:8443]',
    async run(args, io) {
      const pem = await rootPem(args, io);
      io.stdout.write(`${new X509Certificate(pem).fingerprint256}\n`);
      return 0;
    },
  },
  {
    name: 'ca export',
    summary: 'Write the root CA certificate (PEM) to stdout or a file',
    usage: 'lia ca export [-o FILE] [--url https://HOST:8443]',
    options: { output: { type: 'string', short: 'o' } },
    async run(args, io) {
      const pem = await rootPem(args, io);
      const out = args.values['output'] as string | undefined;
      if (out) {
        await writeFile(out, pem, { mode: 0o644 });
        io.stderr.write(`wrote ${out} (SHA-256 ${new X509Certificate(pem).fingerprint256})\n`);
      } else {
        io.stdout.write(pem);
      }
      return 0;
    },
  },
];
