/**
 * `POST /v1/audio/transcriptions` and `POST /v1/audio/translations`: a multipart upload (read by
 * `@fastify/multipart`, the file held in memory up to the plugin's `maxAudioBytes`) transcribed by
 * the engine, which checks the key's model allow-list, answers 400 for a model without the
 * `transcription` capability and for a file it cannot decode, and cuts long audio into the
 * model's windows. With `stream`, each window's text leaves as a `transcript.text.delta` event as
 * soon as it is done, then `transcript.text.done`; a failure before the first event keeps its
 * status. docs/audio.md.
 *
 * @module
 */
import multipart from '@fastify/multipart';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { clientGone, Errors, isAppError, startSse, type Hooks } from 'lia/plugin';
import type { TranscriptSegment } from 'lia/engine';
import { openaiErrorBody } from '../errors.js';
import { deltaEvent, doneEvent, readAudioFields, renderTranscription } from '../audio.js';
import { resolveAlias, withModelParam, type RouteOptions } from './common.js';

/** The upload limit OpenAI sets, which is the default here: 25 MiB. */
export const DEFAULT_MAX_AUDIO_BYTES = 25 * 1024 * 1024;

export interface AudioRouteOptions extends RouteOptions {
  /** The largest file a request may upload, in bytes. */
  maxAudioBytes: number;
}

/** The SSE `event:` name of a frame: its `type`. */
const eventName = (body: unknown): string | undefined => (body as { type?: string }).type;

/** Reads the multipart body: the text fields in order and the `file` field's bytes. */
async function readParts(request: FastifyRequest, maxBytes: number): Promise<{ fields: [string, string][]; file: Uint8Array | undefined }> {
  if (!request.isMultipart()) {
    throw Errors.badRequest('send the audio as multipart/form-data, with the file in the "file" field', { param: 'file' });
  }
  const fields: [string, string][] = [];
  let file: Uint8Array | undefined;
  try {
    for await (const part of request.parts()) {
      if (part.type === 'file') {
        const bytes = await part.toBuffer();
        if (part.fieldname === 'file') file = bytes;
      } else if (typeof part.value === 'string') fields.push([part.fieldname, part.value]);
    }
  } catch (err) {
    if (isAppError(err)) throw err;
    const code = (err as { code?: string }).code;
    if (code === 'FST_REQ_FILE_TOO_LARGE') {
      throw Errors.payloadTooLarge(`the audio file is larger than ${maxBytes} bytes, the most this appliance takes`, { param: 'file' });
    }
    throw Errors.badRequest(`the multipart body cannot be read: ${err instanceof Error ? err.message : String(err)}`);
  }
  return { fields, file };
}

/** Registers the routes, with the multipart parser in this plugin's context only. */
export async function audioRoutes(app: FastifyInstance, hooks: Hooks, options: AudioRouteOptions): Promise<void> {
  await app.register(multipart, {
    limits: { fileSize: options.maxAudioBytes, files: 4, fields: 64, fieldSize: 1024 * 1024, parts: 128 },
  });
  for (const [path, task] of [
    ['/v1/audio/transcriptions', 'transcribe'],
    ['/v1/audio/translations', 'translate'],
  ] as const) {
    app.post(path, { config: { scope: 'inference' } }, async (request, reply) => {
      const { fields, file } = await readParts(request, options.maxAudioBytes);
      const asked = readAudioFields(fields, file, task);
      if (asked.ignored.length > 0) request.log.debug({ ignored: asked.ignored }, 'accepted without effect');
      const engine = hooks.extensions.get('inference');
      if (!engine.transcribe) throw Errors.unavailable('the inference service does not transcribe');
      const signal = clientGone(reply);
      const native = {
        model: resolveAlias(asked.model, options),
        audio: asked.file,
        task,
        ...(asked.language ? { language: asked.language } : {}),
        ...(asked.prompt ? { prompt: asked.prompt } : {}),
        ...(asked.temperature !== undefined ? { temperature: asked.temperature } : {}),
      };
      if (!asked.stream) {
        const result = await engine.transcribe(native, signal).catch((err) => withModelParam(err, asked.model));
        const { type, body } = renderTranscription(result, asked);
        return reply.type(type).send(body);
      }
      // The head leaves with the first delta, so a failure before it keeps its status.
      let sse: ReturnType<typeof startSse> | undefined;
      const open = () => (sse ??= startSse(reply, { eventName, errorFrame: openaiErrorBody }));
      const onSegment = (segment: TranscriptSegment) => void open().write(deltaEvent(segment));
      let result;
      try {
        result = await engine.transcribe(native, signal, onSegment);
      } catch (err) {
        if (!sse) return withModelParam(err, asked.model);
        sse.fail(err);
        return reply;
      }
      open().write(doneEvent(result));
      open().end();
      return reply;
    });
  }
}
