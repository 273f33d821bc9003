/**
 * The CLI command contract. `core/cli/main.ts` collects the commands of every module under
 * `core/cli/commands/` and dispatches `lia <name> [args]` to the one whose name matches (names may
 * have two words, such as `key rotate`). Every command except `serve` talks to a running
 * appliance through its HTTPS API with {@link ApiClient}, as Ollama's CLI does.
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
  /** A client for the appliance named by `--url`/`LIA_URL` (default https://localhost:8443). */
  client(): Promise<ApiClient>;
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

/** An error the CLI prints without a stack; `exitCode` defaults to 1. */
export class CliError extends Error {
  override readonly name = 'CliError';
  constructor(message: string, readonly exitCode = 1) {
    super(message);
  }
}
