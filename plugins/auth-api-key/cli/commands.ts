/**
 * `lia key show` prints the master key from the local key file; `lia key rotate` asks the running
 * appliance for a new one through `POST /system/api-keys/rotate` (trusting the CA) and prints it.
 *
 * @module
 */
import { readFile } from 'node:fs/promises';
import { CliError, type CliCommand } from 'lia/plugin';

export const commands: CliCommand[] = [
  {
    name: 'key show',
    summary: 'Print the master API key (reads the key file; run it on the appliance)',
    usage: 'lia key show',
    async run(_args, io) {
      const file = `${io.dataDir}/keys/master.key`;
      const key = await readFile(file, 'utf8').catch(() => {
        throw new CliError(`cannot read ${file}: start the appliance once, or run as the user that owns it`);
      });
      io.stdout.write(`${key.trim()}\n`);
      return 0;
    },
  },
  {
    name: 'key rotate',
    summary: 'Replace the master API key now (the old key stops working at once)',
    usage: 'lia key rotate [--url https://HOST:8443]',
    async run(_args, io) {
      const client = await io.client();
      const body = await client.json<{ key: string; hint: string }>('POST', '/system/api-keys/rotate');
      io.stdout.write(`${body.key}\n`);
      io.stderr.write('The previous key no longer works; update your clients.\n');
      return 0;
    },
  },
];
