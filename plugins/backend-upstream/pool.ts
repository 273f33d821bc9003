/**
 * The pool: every upstream, the models each serves (configured and discovered), and the replicas
 * of each model LIA shows. It checks each upstream's health on an interval (its model listing,
 * which also refreshes discovery), takes a failing upstream out at once and brings it back when a
 * check passes, and picks the replica with the fewest outstanding requests.
 *
 * @module
 */
import { createHash } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import { Errors } from 'lia/plugin';
import type { ModelSource } from 'lia/model-store';
import type { ModelCapability, ModelStore, RemoteModel } from 'lia/model-store';
import { ollama } from './flavours/ollama.js';
import { openai } from './flavours/openai.js';
import type { Flavour } from './flavours/types.js';
import type { BackendUpstreamOptions } from './options.js';
import { Upstream } from './upstream.js';

/** The format of remote models: only this plugin's backend serves it, and nothing is stored in it. */
export const UPSTREAM_FORMAT = 'upstream';

const DEFAULT_CAPABILITIES: ModelCapability[] = ['completion', 'tools'];

/** One upstream's copy of a model. */
export interface Replica {
  upstream: Upstream;
  flavour: Flavour;
  /** The model's name on that upstream. */
  model: string;
}

interface Served {
  name: string;
  capabilities: ModelCapability[];
  contextLength: number;
  replicas: Replica[];
}

export class Pool implements ModelSource {
  readonly name = 'backend-upstream';
  readonly upstreams: Upstream[];
  readonly #o: BackendUpstreamOptions;
  readonly #log: FastifyBaseLogger;
  /** Discovered model names per upstream. */
  readonly #discovered = new Map<Upstream, string[]>();
  readonly #lastDiscovery = new Map<Upstream, number>();
  #served = new Map<string, Served>();
  #snapshot: RemoteModel[] = [];
  readonly #started = new Date();
  #timer: NodeJS.Timeout | null = null;
  readonly #closing = new AbortController();
  /** The local models, to warn of a remote model whose name one of them holds; none without a store. */
  #local: ModelStore | undefined;

  constructor(o: BackendUpstreamOptions, log: FastifyBaseLogger, env: NodeJS.ProcessEnv = process.env) {
    this.#o = o;
    this.#log = log;
    this.upstreams = o.upstreams.map((u) => new Upstream(u, env));
    this.#rebuild();
  }

  /**
   * Runs the first health check of every upstream (discovery included) and warns of every remote
   * model a local one shadows, then one check per interval, warning again after each discovery
   * refresh that finds such a model.
   */
  async start(local?: ModelStore): Promise<void> {
    this.#local = local;
    await this.checkAll();
    await this.warnShadowed(this.upstreams);
    const tick = () => {
      const run = async () => {
        const refreshed = await this.checkAll();
        if (refreshed.length > 0) await this.warnShadowed(refreshed);
      };
      this.#timer = setTimeout(() => void run().finally(() => this.#closing.signal.aborted || tick()), this.#o.health_interval_ms);
      this.#timer.unref();
    };
    tick();
  }

  /**
   * Logs a warning for each model of `upstreams` whose LIA name a local model holds. The model
   * store resolves such a name to the local model (a local model is never shadowed), so the remote
   * one is reachable only under another name the operator gives it (`aliases`, `models[].name`).
   * The store's own name rules decide: its entry for the name is the local model's.
   */
  async warnShadowed(upstreams: readonly Upstream[]): Promise<void> {
    if (!this.#local) return;
    for (const s of this.#served.values()) {
      const replicas = s.replicas.filter((r) => upstreams.includes(r.upstream));
      if (replicas.length === 0) continue;
      const entry = await this.#local.entry(s.name).catch(() => undefined);
      if (!entry || entry.remote) continue;
      for (const r of replicas) {
        this.#log.warn(
          { model: entry.name, upstream: r.upstream.name, remote_model: r.model },
          `the local model "${entry.name}" keeps its name: upstream "${r.upstream.name}" serves "${r.model}" under it too, which is not reachable by that name; give it another one (aliases or models[].name of the upstream)`,
        );
      }
    }
  }

  async close(): Promise<void> {
    this.#closing.abort();
    if (this.#timer) clearTimeout(this.#timer);
    await Promise.all(this.upstreams.map((u) => u.close()));
  }

  models(): readonly RemoteModel[] {
    return this.#snapshot;
  }

  /** What serves a model LIA shows, or a 404. */
  served(name: string): Served {
    const s = this.#served.get(name.toLowerCase()) ?? this.#served.get(`${name.toLowerCase()}:latest`);
    if (!s || s.replicas.length === 0) throw Errors.modelNotFound(`model '${name}' is not served by any upstream`);
    return s;
  }

  /**
   * The replica to send a request to: among the healthy ones not in `skip`, the one with the
   * fewest outstanding requests. When none is healthy, the others are tried all the same (a check
   * may not have seen one come back yet). Undefined when every replica is in `skip`.
   */
  pick(s: Served, skip: ReadonlySet<Upstream>): Replica | undefined {
    const open = s.replicas.filter((r) => !skip.has(r.upstream));
    const healthy = open.filter((r) => r.upstream.healthy);
    const from = healthy.length > 0 ? healthy : open;
    let best: Replica | undefined;
    for (const r of from) if (!best || r.upstream.outstanding < best.upstream.outstanding) best = r;
    return best;
  }

  /** Takes an upstream out after a failure that says it is down; a health check brings it back. */
  markDown(u: Upstream, why: string): void {
    if (!u.healthy) return;
    u.healthy = false;
    this.#log.warn({ upstream: u.name, why }, 'upstream taken out until a health check passes');
  }

  /** Checks every upstream; resolves with those whose discovery ran (see {@link warnShadowed}). */
  async checkAll(): Promise<Upstream[]> {
    const discovered = await Promise.all(this.upstreams.map((u) => this.#check(u)));
    return this.upstreams.filter((_, i) => discovered[i]);
  }

  /** One health check of an upstream, with its discovery when due; true when discovery ran. */
  async #check(u: Upstream): Promise<boolean> {
    const flavour = flavourOf(u);
    const signal = AbortSignal.any([this.#closing.signal, AbortSignal.timeout(Math.min(u.options.timeout_ms, 10_000))]);
    try {
      const res = await u.send('GET', flavour.listPath, undefined, signal);
      const listed = flavour.listed(await res.body.json());
      if (!u.healthy) this.#log.info({ upstream: u.name }, 'upstream is back');
      u.healthy = true;
      const due = (this.#lastDiscovery.get(u) ?? 0) + u.options.refresh_ms <= Date.now();
      if (u.options.discover && due) {
        this.#lastDiscovery.set(u, Date.now());
        const before = this.#discovered.get(u)?.join('\n');
        this.#discovered.set(u, listed);
        if (before !== listed.join('\n')) this.#rebuild();
        return true;
      }
    } catch (err) {
      if (this.#closing.signal.aborted) return false;
      if (u.healthy) this.#log.warn({ upstream: u.name, err: (err as Error).message }, 'upstream failed its health check');
      u.healthy = false;
    }
    return false;
  }

  /** Recomputes the served models and the catalog snapshot from the configuration and discovery. */
  #rebuild(): void {
    const served = new Map<string, Served>();
    const add = (name: string, replica: Replica, capabilities: ModelCapability[] | undefined, contextLength: number | undefined) => {
      const key = normal(name);
      const s = served.get(key) ?? { name, capabilities: capabilities ?? DEFAULT_CAPABILITIES, contextLength: contextLength ?? 0, replicas: [] };
      if (capabilities) s.capabilities = capabilities;
      if (contextLength) s.contextLength = contextLength;
      if (!s.replicas.some((r) => r.upstream === replica.upstream)) s.replicas.push(replica);
      served.set(key, s);
    };
    for (const u of this.upstreams) {
      const flavour = flavourOf(u);
      for (const m of u.options.models) {
        const e = typeof m === 'string' ? { model: m } : m;
        add(e.name ?? e.model, { upstream: u, flavour, model: e.model }, e.capabilities as ModelCapability[] | undefined, e.context_length);
      }
      for (const model of this.#discovered.get(u) ?? []) {
        add(u.options.aliases[model] ?? model, { upstream: u, flavour, model }, undefined, undefined);
      }
    }
    this.#served = served;
    this.#snapshot = [...served.values()].map((s) => this.#remote(s));
  }

  #remote(s: Served): RemoteModel {
    const hosts = s.replicas.map((r) => r.upstream.base);
    const models = [...new Set(s.replicas.map((r) => r.model))];
    const digest = createHash('sha256')
      .update(JSON.stringify([s.name, hosts, models]))
      .digest('hex');
    return {
      name: s.name,
      format: UPSTREAM_FORMAT,
      digest,
      capabilities: s.capabilities,
      details: { parent_model: '', format: UPSTREAM_FORMAT, family: '', families: null, parameter_size: '', quantization_level: '' },
      remote: { host: hosts.join(', '), model: models.join(', ') },
      modifiedAt: this.#started,
    };
  }
}

function flavourOf(u: Upstream): Flavour {
  return u.flavour === 'openai' ? openai : ollama;
}

/** The key a name is served under: lower case, `:latest` added when it has no tag (as the store shows it). */
export function normal(name: string): string {
  const lower = name.toLowerCase();
  const last = lower.split('/').pop() ?? lower;
  return last.includes(':') ? lower : `${lower}:latest`;
}
