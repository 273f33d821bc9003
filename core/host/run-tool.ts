/**
 * Runs a host tool (`nvidia-smi`, `rocm-smi`, ...) without a shell, with a hard deadline. The
 * child gets its own process group so a timeout kills everything it started (a wrapper script's
 * `sleep` included); the promise settles at the deadline even if a grandchild still holds the
 * pipes, so a hung tool can never hang a caller.
 *
 * Shared by the host plugins (host-gpu, host-network, host-services) through `core/index.ts`.
 *
 * @module
 */
import { spawn } from 'node:child_process';

/** Exit status and output of one run (`code` is null when a signal ended it). */
export interface ToolResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Deadline, output cap and cancellation of one run. */
export interface RunToolOptions {
  /** Deadline in milliseconds. Defaults to 5000. */
  timeoutMs?: number;
  /** Largest stdout kept, in bytes; more fails the run. Defaults to 4 MiB. */
  maxBytes?: number;
  signal?: AbortSignal;
}

/** A tool that could not run, timed out or printed too much. */
export class ToolError extends Error {
  override readonly name = 'ToolError';
  constructor(
    message: string,
    readonly reason: 'missing' | 'timeout' | 'overflow' | 'aborted' | 'spawn',
  ) {
    super(message);
  }
}

/** Runs `file args...`; resolves with the exit code and output, rejects with a {@link ToolError}. */
export function runTool(file: string, args: readonly string[], options: RunToolOptions = {}): Promise<ToolResult> {
  const timeoutMs = options.timeoutMs ?? 5000;
  const maxBytes = options.maxBytes ?? 4 * 1024 * 1024;
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true, env: { ...process.env, LC_ALL: 'C' } });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let size = 0;
    let settled = false;
    const finish = (fn: () => void): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      fn();
    };
    const kill = (): void => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
      child.stdout?.destroy();
      child.stderr?.destroy();
    };
    const onAbort = (): void => {
      kill();
      finish(() => reject(new ToolError(`${file} was aborted`, 'aborted')));
    };
    const timer = setTimeout(() => {
      kill();
      finish(() => reject(new ToolError(`${file} did not answer within ${timeoutMs} ms`, 'timeout')));
    }, timeoutMs);
    options.signal?.addEventListener('abort', onAbort, { once: true });
    child.stdout?.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        kill();
        finish(() => reject(new ToolError(`${file} printed more than ${maxBytes} bytes`, 'overflow')));
        return;
      }
      out.push(chunk);
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      if (err.length < 64) err.push(chunk);
    });
    child.on('error', (e: NodeJS.ErrnoException) => {
      const reason = e.code === 'ENOENT' ? 'missing' : 'spawn';
      finish(() => reject(new ToolError(reason === 'missing' ? `${file} is not installed` : `${file} could not start: ${e.message}`, reason)));
    });
    child.on('close', (code) => {
      finish(() => resolve({ code, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') }));
    });
    child.unref();
  });
}

/** The first non-empty line of a tool's complaint, for an error message. */
export function firstLine(text: string): string {
  return (
    text
      .split('\n')
      .map((l) => l.trim())
      .find((l) => l.length > 0) ?? ''
  );
}
