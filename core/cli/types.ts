/**
 * The CLI command contract. `core/cli/main.ts` collects core's commands and those of every enabled
 * plugin (a plugin's `commands` in its definition) and dispatches `lia <name> [args]` to the one
 * whose name matches (names may have two words, such as `key rotate`). Commands other than the
 * local ones talk to a running appliance through its HTTPS API with {@link ApiClient}, as
 * Ollama's CLI does.
 *
 * @module
 */
import type { ParseArgsConfig } from 'node:util';
import type { ApiClient } from './client.js';

export interface CliIO {
  stdout: NodeJS.WritableStream & { isTTY?: boolean; columns?: number };
  stderr: NodeJS.WritableStream;
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  env: NodeJS.ProcessEnv;
  /**
   * The data directory of the local appliance (`--data-dir`, else `LIA_DATA_DIR`, else the
   * configuration's `dataDir`): where local commands read the key file and the CA.
   */
  dataDir: string;
  /**
   * A client for the appliance named by `url`, else `--url`/`LIA_URL` (default
   * https://localhost:8443), trusting `LIA_CA_CERT` (default: the data directory's CA).
   */
  client(url?: string): Promise<ApiClient>;
}

export interface CliArgs {
  positionals: string[];
  values: Record<string, string | boolean | (string | boolean)[] | undefined>;
}

export interface CliCommand {
  /** `pull`, `key rotate`, ... */
  name: string;
  /** One line for `lia --help`. */
  summary: string;
  /** Usage line, e.g. `lia pull NAME [--insecure]`. */
  usage: string;
  options?: ParseArgsConfig['options'];
  /** Returns the process exit code. */
  run(args: CliArgs, io: CliIO): Promise<number>;
}

const BRAND = Symbol.for('lia.cli-error');

/**
 * An error the CLI prints without a stack; `exitCode` defaults to 1. Recognised by a brand, so a
 * plugin with its own copy of the package can throw it too.
 */
export class CliError extends Error {
  override readonly name = 'CliError';
  readonly [BRAND] = true;
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message);
  }
}

/** True for a {@link CliError} from any copy of the package. */
export function isCliError(err: unknown): err is CliError {
  return typeof err === 'object' && err !== null && (err as { [BRAND]?: unknown })[BRAND] === true;
}
