/**
 * The `upstream` inference backend: a remote model "loads" at once (nothing is local) and forwards
 * every generation, chat and embedding to a replica the pool picks. A request that fails before
 * its first event is sent once more to another replica; one that fails after it ends with the
 * error, which the route writes as the stream's last frame. The engine's signal (the client went
 * away) and an early stop of the consumer both abort the upstream request.
 *
 * @module
 */
import type { FastifyBaseLogger } from 'fastify';
import { Errors } from 'lia/plugin';
import type { FormatHandler, InferenceBackend, LoadedModel } from 'lia/engine';
import type { ChatParams, EmbedParams, EmbedResult, GenerateParams, GenerationEvent } from 'lia/engine';
import type { ResolvedModel } from 'lia/model-store';
import { lines, type UpstreamCall } from './flavours/types.js';
import { UPSTREAM_FORMAT, type Pool, type Replica } from './pool.js';
import { failureOf, type Upstream } from './upstream.js';

/** The format of remote models. Nothing is ever stored in it: `/api/create` never recognises it. */
export const upstreamFormat: FormatHandler = {
  name: UPSTREAM_FORMAT,
  mediaTypes: ['application/vnd.lia.upstream.none'],
  layout: 'file',
  files: 'no files: remote models are declared in the configuration (plugins.backend-upstream)',
  recognise: () => null,
  async describe() {
    throw Errors.badRequest('remote models have no files; declare them under plugins.backend-upstream');
  },
};

type Build = (r: Replica) => UpstreamCall;

export function upstreamBackend(pool: Pool, log: FastifyBaseLogger): InferenceBackend {
  return {
    name: 'upstream',
    formats: [upstreamFormat],
    async estimateMemory() {
      return { totalBytes: 0, vramBytes: 0 };
    },
    async load(model: ResolvedModel): Promise<LoadedModel> {
      const served = pool.served(model.name);
      const forward = new Forwarder(pool, model.name, log);
      return {
        capabilities: served.capabilities,
        contextLength: served.contextLength,
        sizeBytes: 0,
        vramBytes: 0,
        slots: served.replicas.reduce((n, r) => n + r.upstream.options.max_concurrency, 0),
        generate: (p: GenerateParams, signal: AbortSignal) => forward.stream((r) => r.flavour.generate(r.model, p), p.whole ?? false, signal),
        chat: (p: ChatParams, signal: AbortSignal) => forward.stream((r) => r.flavour.chat(r.model, p), p.whole ?? false, signal),
        embed: (p: EmbedParams, signal: AbortSignal) => forward.embed(p, signal),
        async unload() {},
      };
    },
  };
}

/** Sends one model's requests to its replicas, with the one retry before the first event. */
class Forwarder {
  constructor(
    readonly pool: Pool,
    readonly model: string,
    readonly log: FastifyBaseLogger,
  ) {}

  /**
   * Tries up to two replicas (the second only when the first failed before answering anything and
   * the failure is the upstream's, not the request's). `attempt` gets the replica and a signal
   * that aborts with the client's and when the attempt ends.
   */
  async *#attempts<T>(signal: AbortSignal, attempt: (r: Replica, signal: AbortSignal, answered: () => void) => AsyncGenerator<T>): AsyncGenerator<T> {
    const served = this.pool.served(this.model);
    const tried = new Set<Upstream>();
    let last: Error | undefined;
    for (let n = 0; n < 2; n++) {
      const replica = this.pool.pick(served, tried);
      if (!replica) break;
      tried.add(replica.upstream);
      const own = new AbortController();
      let answered = false;
      replica.upstream.outstanding++;
      try {
        yield* attempt(replica, AbortSignal.any([signal, own.signal]), () => (answered = true));
        return;
      } catch (err) {
        const f = failureOf(err);
        if (f.down) this.pool.markDown(replica.upstream, (err as Error).message);
        if (answered || signal.aborted || f.kind === 'client') throw err;
        last = err as Error;
        this.log.warn(
          { model: this.model, upstream: replica.upstream.name, err: (err as Error).message },
          'upstream failed before answering; trying another replica',
        );
      } finally {
        replica.upstream.outstanding--;
        own.abort(); // ends the upstream request when the consumer stopped early
      }
    }
    throw last ?? Errors.unavailable(`no upstream serves '${this.model}' now`, { headers: { 'Retry-After': '1' } });
  }

  /**
   * A generation's events as they come. With `whole` (the client waits for the whole answer) they
   * are gathered first, so an answer that breaks off half-way is started again on another replica
   * and the client never sees the failure.
   */
  stream(build: Build, whole: boolean, signal: AbortSignal): AsyncIterable<GenerationEvent> {
    return this.#attempts(signal, async function* (r, sig, answered) {
      const call = build(r);
      const started = process.hrtime.bigint();
      const res = await r.upstream.send('POST', call.path, call.body, sig);
      const gathered: GenerationEvent[] = [];
      try {
        for await (const event of r.flavour.events(lines(res.body), started)) {
          if (whole) {
            gathered.push(event);
            continue;
          }
          answered();
          yield event;
        }
      } catch (err) {
        throw r.upstream.streamError(err, sig);
      }
      answered();
      yield* gathered;
    });
  }

  async embed(p: EmbedParams, signal: AbortSignal): Promise<EmbedResult> {
    for await (const result of this.#attempts(signal, async function* (r, sig) {
      const call = r.flavour.embed(r.model, p);
      const res = await r.upstream.send('POST', call.path, call.body, sig);
      let json: unknown;
      try {
        json = await res.body.json();
      } catch (err) {
        throw r.upstream.streamError(err, sig);
      }
      yield r.flavour.embedResult(json);
    })) {
      return result;
    }
    throw Errors.badGateway(`no upstream answered for '${this.model}'`);
  }
}
