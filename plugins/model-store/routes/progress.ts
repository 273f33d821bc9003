/**
 * Runs a long operation (pull, push, create) as Ollama does: NDJSON progress lines ending with
 * `{"status":"success"}` or an `{"error"}` line, or with `"stream": false` one final object.
 * Failures before the first line keep their real HTTP status.
 *
 * @module
 */
import type { FastifyReply } from 'fastify';
import { clientGone, startNdjson } from 'lia/plugin';

/** A progress line. */
export interface Progress {
  status: string;
  digest?: string;
  total?: number;
  completed?: number;
}

/** The operation proper; `emit` writes a line (or records it without streaming). */
export type ProgressTask = (emit: (p: Progress) => void, signal: AbortSignal) => Promise<void>;

/** Sends the outcome of `task`; `stream` selects NDJSON or one final object. */
export async function sendProgress(reply: FastifyReply, stream: boolean, task: ProgressTask): Promise<FastifyReply | undefined> {
  const signal = clientGone(reply);
  if (!stream) {
    await task(() => undefined, signal);
    return reply.code(200).send({ status: 'success' });
  }
  const writer = startNdjson<Progress>(reply);
  try {
    await task((p) => writer.write(p), signal);
    writer.write({ status: 'success' });
    writer.end();
  } catch (err) {
    writer.fail(err);
  }
  return undefined;
}
