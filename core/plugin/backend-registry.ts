/**
 * The `backends` hook: the inference backends the enabled plugins registered, and the model
 * formats they serve. Exactly one backend serves each format. When two enabled backends claim
 * the same format, the configuration's `backends` key (format → backend or plugin name) picks
 * one; without it the start stops with exit code 2 naming both ({@link ConfigError}). Core checks
 * this once every plugin is registered (`onReady` in `core/http/app.ts`); lookups before that
 * decide the same way on first use.
 *
 * @module
 */
import { ConfigError } from '../config/load.js';
import type { FormatHandler, InferenceBackend } from '../contracts/backend.js';
import type { ModelFormat } from '../contracts/model-store.js';
import { Errors } from '../errors.js';

/** Allowed format names: they become folder names in the model store. */
export const FORMAT_NAME = /^[a-z0-9][a-z0-9_-]{0,31}$/;

/** The chosen backend and handler of each format. */
type Chosen = Map<string, { backend: InferenceBackend; handler: FormatHandler }>;

export class BackendRegistry {
  readonly #items: InferenceBackend[] = [];
  /** Which plugin registered each backend (recorded by core after each plugin's setup). */
  readonly #plugins = new Map<InferenceBackend, string>();
  #choices: Readonly<Record<string, string>> = {};
  #where = 'the configuration';
  #chosen: Chosen | null = null;

  /** Adds a backend; a second one of the same name, or a malformed format name, is an error. */
  register(backend: InferenceBackend): void {
    if (this.#items.some((b) => b.name === backend.name)) throw new Error(`inference backend "${backend.name}" is registered twice`);
    const seen = new Set<string>();
    for (const h of backend.formats) {
      if (!FORMAT_NAME.test(h.name)) throw new Error(`inference backend "${backend.name}": format name "${h.name}" must match ${FORMAT_NAME}`);
      if (seen.has(h.name)) throw new Error(`inference backend "${backend.name}" declares the "${h.name}" format twice`);
      seen.add(h.name);
    }
    this.#items.push(backend);
    this.#chosen = null;
  }

  list(): readonly InferenceBackend[] {
    return this.#items;
  }

  /**
   * Records `plugin` as the owner of the backends registered since the last call, so the
   * configuration may name a backend by its plugin. Core calls it after each plugin's setup.
   * @internal
   */
  claim(plugin: string): void {
    for (const b of this.#items) if (!this.#plugins.has(b)) this.#plugins.set(b, plugin);
  }

  /**
   * Applies the configuration's `backends` choices and checks them against what is registered.
   * Throws a {@link ConfigError} when two backends claim a format and no choice picks one, when a
   * choice names no enabled backend of its format, or when two formats claim one media type.
   */
  configure(choices: Readonly<Record<string, string>>, where: string): void {
    this.#choices = choices;
    this.#where = where;
    this.#chosen = this.#decide();
  }

  /** The backend that runs `format`, or a 400 naming the format. */
  forFormat(format: ModelFormat): InferenceBackend {
    const entry = this.#settled().get(format);
    if (!entry) throw Errors.badRequest(`no enabled inference backend runs models in the "${format}" format`);
    return entry.backend;
  }

  /** The handler of `format` from its chosen backend, or undefined when no enabled backend serves it. */
  handler(format: ModelFormat): FormatHandler | undefined {
    return this.#settled().get(format)?.handler;
  }

  /** Every served format's handler, one per format, in registration order. */
  handlers(): FormatHandler[] {
    return [...this.#settled().values()].map((e) => e.handler);
  }

  /** The handler whose weights travel in layers of `mediaType`, if an enabled backend has one. */
  forMediaType(mediaType: string): FormatHandler | undefined {
    return this.handlers().find((h) => h.mediaTypes.includes(mediaType));
  }

  #settled(): Chosen {
    return (this.#chosen ??= this.#decide());
  }

  #label(b: InferenceBackend): string {
    const plugin = this.#plugins.get(b);
    return plugin && plugin !== b.name ? `"${b.name}" (plugin "${plugin}")` : `"${b.name}"`;
  }

  #decide(): Chosen {
    const claimants = new Map<string, Array<{ backend: InferenceBackend; handler: FormatHandler }>>();
    for (const backend of this.#items) {
      for (const handler of backend.formats) {
        const list = claimants.get(handler.name) ?? [];
        list.push({ backend, handler });
        claimants.set(handler.name, list);
      }
    }
    const chosen: Chosen = new Map();
    for (const [format, wanted] of Object.entries(this.#choices)) {
      const list = claimants.get(format) ?? [];
      const pick = list.find((c) => c.backend.name === wanted || this.#plugins.get(c.backend) === wanted);
      if (!pick) {
        const served = list.length > 0 ? `the "${format}" format is served by ${list.map((c) => this.#label(c.backend)).join(' and ')}` : `no enabled backend serves the "${format}" format`;
        throw new ConfigError(`${this.#where}: "backends.${format}" names "${wanted}", but ${served}`);
      }
      chosen.set(format, pick);
    }
    for (const [format, list] of claimants) {
      if (chosen.has(format)) continue;
      if (list.length > 1) {
        throw new ConfigError(
          `${this.#where}: ${list.length} enabled backends serve the "${format}" format: ${list.map((c) => this.#label(c.backend)).join(' and ')}; ` +
            `choose one with "backends.${format}" (a backend or plugin name)`,
        );
      }
      chosen.set(format, list[0]!);
    }
    const byMediaType = new Map<string, string>();
    for (const [format, { handler }] of chosen) {
      for (const type of handler.mediaTypes) {
        const other = byMediaType.get(type);
        if (other) throw new ConfigError(`${this.#where}: the "${other}" and "${format}" formats both claim layers of media type "${type}"; disable one of their backends`);
        byMediaType.set(type, format);
      }
    }
    return chosen;
  }
}
