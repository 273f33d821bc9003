/**
 * `POST /v1/audio/speech`: text to speech. The engine checks the key's model allow-list, answers
 * 400 for a model without the `speech` capability, an empty input or an unknown voice, and
 * resolves once the first sentence is spoken and encoded; then the audio leaves as ffmpeg
 * writes it, the response's body (`stream_format: "audio"`, the default) or SSE events
 * (`"sse"`). A client that leaves stops the synthesis and the encoder. docs/audio.md.
 *
 * @module
 */
import type { ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { clientGone, Errors, startSse, type Hooks } from 'lia/plugin';
import { openaiErrorBody } from '../errors.js';
import { SpeechBody, speechDelta, speechDone, translateSpeechRequest } from '../speech.js';
import { resolveAlias, withModelParam, type RouteOptions } from './common.js';

/** The SSE `event:` name of a frame: its `type`. */
const eventName = (body: unknown): string | undefined => (body as { type?: string }).type;

/** Resolves once `res` takes more data, or is closed. */
function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.once('drain', done);
    res.once('close', done);
  });
}

/** Registers the route. */
export function speechRoute(app: FastifyInstance, hooks: Hooks, options: RouteOptions): void {
  app.post<{ Body: SpeechBody }>('/v1/audio/speech', { schema: { body: SpeechBody }, config: { scope: 'inference' } }, async (request, reply) => {
    const body = request.body;
    const engine = hooks.extensions.get('inference');
    if (!engine.speak) throw Errors.unavailable('the inference service does not speak');
    const native = translateSpeechRequest(body, resolveAlias(body.model, options));
    const speech = await engine.speak(native, clientGone(reply)).catch((err) => withModelParam(err, body.model));
    if (body.stream_format !== 'sse') {
      return reply
        .type(speech.contentType)
        .header('cache-control', 'no-store')
        .send(Readable.from(speech.audio, { objectMode: false }));
    }
    const sse = startSse(reply, { eventName, errorFrame: openaiErrorBody });
    try {
      for await (const chunk of speech.audio) {
        if (sse.closed) break;
        // A client that reads slowly holds back the encoder, and so the synthesis, as the plain body does.
        if (!sse.write(speechDelta(chunk))) await drained(reply.raw);
      }
      sse.write(speechDone(speech.usage()));
      sse.end();
    } catch (err) {
      sse.fail(err);
    }
    return reply;
  });
}
