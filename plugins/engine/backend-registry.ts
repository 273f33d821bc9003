/**
 * The `backends` hook: the inference backends the enabled plugins registered, and the model
 * formats they serve. Exactly one backend serves each format. When two enabled backends claim
 * the same format, the configuration's `backends` key (format → backend or plugin name) picks
 * one; without it the start stops with exit code 2 naming both ({@link ConfigError}). The engine,
 * which owns the hook, checks this once every plugin is registered (its `onReady`); lookups before
 * that decide the same way on first use.
 *
 * A backend may also run a format with another backend's handler (`InferenceBackend.runs`, as
 * `backend-llama-server` runs GGUF): it never owns the format, so it conflicts with nobody,
 * but the `backends` key may choose it for a format or for one model (a key with a `:`, such as
 * `llava:7b`), a model that needs a capability the format's backend lacks (`vision`) goes to one
 * that declares it, and a model with a capability another backend serves better
 * (`InferenceBackend.prefers`: backend-llama-server's `rerank`) goes there while that backend is
 * available on this machine ({@link BackendRegistry.forModel}).
 *
 * A plugin may also register a format it recognises without running it ({@link
 * BackendRegistry.addFormat}, as the `gguf` plugin does): backends that `runs` it serve it with
 * that handler when no enabled backend declares the format in `formats`.
 *
 * @module
 */
import { ConfigError, Errors } from 'lia/plugin';
import type { ModelCapability, ModelFormat } from 'lia/model-store';
import type { FormatHandler, InferenceBackend } from './public.js';

/** Allowed format names: they become folder names in the model store. */
export const FORMAT_NAME = /^[a-z0-9][a-z0-9_-]{0,31}$/;

/**
 * Capabilities that a backend must declare to serve (`InferenceBackend.capabilities`); a model's
 * other capabilities are the weights' own and any backend of its format serves them.
 */
export const BACKEND_CAPABILITIES: readonly ModelCapability[] = ['vision', 'audio'];

/** The model a backend is looked up for. */
export interface ModelToRun {
  name: string;
  format: ModelFormat;
  capabilities: readonly ModelCapability[];
}

/** The chosen backend and handler of each format. */
type Chosen = Map<string, { backend: InferenceBackend; handler: FormatHandler }>;

export class BackendRegistry {
  readonly #items: InferenceBackend[] = [];
  /** Which plugin registered each backend (recorded by core after each plugin's setup). */
  readonly #plugins = new Map<InferenceBackend, string>();
  #choices: Readonly<Record<string, string>> = {};
  /** Choices for single models (`backends` keys with a `:`), by lower-case name. */
  #modelChoices = new Map<string, string>();
  #where = 'the configuration';
  #chosen: Chosen | null = null;
  /** Formats registered without a backend (addFormat). */
  readonly #formats: FormatHandler[] = [];

  /**
   * Adds a backend that the plugin `plugin` (its `ctx.name`) registers, so the configuration's
   * `backends` may name it by either; a second one of the same name, or a malformed format name,
   * is an error.
   */
  register(backend: InferenceBackend, plugin: string): void {
    if (this.#items.some((b) => b.name === backend.name)) throw new Error(`inference backend "${backend.name}" is registered twice`);
    const seen = new Set<string>();
    for (const h of backend.formats) {
      if (!FORMAT_NAME.test(h.name)) throw new Error(`inference backend "${backend.name}": format name "${h.name}" must match ${FORMAT_NAME}`);
      if (seen.has(h.name)) throw new Error(`inference backend "${backend.name}" declares the "${h.name}" format twice`);
      seen.add(h.name);
    }
    this.#items.push(backend);
    this.#plugins.set(backend, plugin);
    this.#chosen = null;
  }

  /**
   * Adds a format that no backend of its own declares: the backends that `runs` it serve it with
   * this handler (the first registered of them is the format's backend) when no enabled backend
   * declares a handler of the same name in `formats`; otherwise that backend's handler is used.
   */
  addFormat(handler: FormatHandler): void {
    if (!FORMAT_NAME.test(handler.name)) throw new Error(`format name "${handler.name}" must match ${FORMAT_NAME}`);
    if (this.#formats.some((h) => h.name === handler.name)) throw new Error(`the "${handler.name}" format is added twice`);
    this.#formats.push(handler);
    this.#chosen = null;
  }

  list(): readonly InferenceBackend[] {
    return this.#items;
  }

  /**
   * Applies the configuration's `backends` choices and checks them against what is registered.
   * Throws a {@link ConfigError} when two backends claim a format and no choice picks one, when a
   * choice names no enabled backend of its format, or when two formats claim one media type.
   */
  configure(choices: Readonly<Record<string, string>>, where: string): void {
    const formats: Record<string, string> = {};
    const models = new Map<string, string>();
    for (const [key, wanted] of Object.entries(choices)) {
      if (key.includes(':')) models.set(key.toLowerCase(), wanted);
      else formats[key] = wanted;
    }
    this.#choices = formats;
    this.#where = where;
    this.#chosen = this.#decide();
    for (const [model, wanted] of models) {
      if (!this.#byName(wanted)) throw new ConfigError(`${where}: "backends.${model}" names "${wanted}", which is no enabled inference backend`);
    }
    this.#modelChoices = models;
  }

  /**
   * The backend that runs `model`, decided at each load:
   * 1. the one the `backends` configuration names for the model itself;
   * 2. else, when the model has a capability that needs a backend's support
   *    ({@link BACKEND_CAPABILITIES}) that its format's backend does not declare, the first
   *    registered backend of the format that does (without one, the format's backend, which serves
   *    the model without the capability: the engine refuses images then);
   * 3. else, unless `backends` names a backend for the format, the first registered backend of the
   *    format that prefers one of the model's capabilities (`InferenceBackend.prefers`), declares
   *    what the model needs, and is available (`InferenceBackend.available`);
   * 4. else the format's backend.
   * A 400 when no enabled backend runs the format, or when the model's chosen backend does not run it.
   */
  async forModel(model: ModelToRun): Promise<InferenceBackend> {
    return (await this.candidates(model))[0]!;
  }

  /**
   * Every enabled backend that can run `model`, best first: {@link forModel}'s choice, then the
   * format's own backend, then the others that run the format (those that declare what the model
   * needs before those that would serve it without). The scheduler goes down this list when an
   * engine dies while it loads the model. Never empty: the errors are {@link forModel}'s.
   */
  async candidates(model: ModelToRun): Promise<InferenceBackend[]> {
    const first = await this.#first(model);
    const own = this.forFormat(model.format);
    const needs = model.capabilities.filter((c) => BACKEND_CAPABILITIES.includes(c));
    const serves = (b: InferenceBackend) => needs.every((c) => b.capabilities?.includes(c));
    const others = this.#items.filter((b) => b !== first && b !== own && runsFormat(b, model.format));
    const rest = [own, ...others.filter(serves), ...others.filter((b) => !serves(b))];
    return [first, ...rest.filter((b) => b !== first)];
  }

  async #first(model: ModelToRun): Promise<InferenceBackend> {
    const named = this.#modelChoices.get(model.name.toLowerCase()) ?? this.#modelChoices.get(`${model.name.toLowerCase()}:latest`);
    if (named) {
      const backend = this.#byName(named);
      if (!backend || !runsFormat(backend, model.format)) {
        throw Errors.badRequest(`"backends.${model.name}" names "${named}", which does not run models in the "${model.format}" format`);
      }
      return backend;
    }
    const backend = this.forFormat(model.format);
    const needs = model.capabilities.filter((c) => BACKEND_CAPABILITIES.includes(c));
    const serves = (b: InferenceBackend) => runsFormat(b, model.format) && needs.every((c) => b.capabilities?.includes(c));
    if (!serves(backend)) return this.#items.find(serves) ?? backend;
    if (this.#choices[model.format] === undefined) {
      for (const b of this.#items) {
        if (b === backend || !serves(b) || !model.capabilities.some((c) => b.prefers?.includes(c))) continue;
        if (await isAvailable(b)) return b;
      }
    }
    return backend;
  }

  #byName(wanted: string): InferenceBackend | undefined {
    return this.#items.find((b) => b.name === wanted || this.#plugins.get(b) === wanted);
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
    // A format added on its own: the first backend that runs it, unless a backend declares it.
    for (const handler of this.#formats) {
      const runner = claimants.has(handler.name) ? undefined : this.#items.find((b) => b.runs?.includes(handler.name));
      if (runner) claimants.set(handler.name, [{ backend: runner, handler }]);
    }
    const chosen: Chosen = new Map();
    for (const [format, wanted] of Object.entries(this.#choices)) {
      const list = claimants.get(format) ?? [];
      let pick = list.find((c) => c.backend.name === wanted || this.#plugins.get(c.backend) === wanted);
      // A backend that runs the format with another's handler (the format's only one).
      const runner = this.#items.find((b) => (b.name === wanted || this.#plugins.get(b) === wanted) && b.runs?.includes(format));
      if (!pick && runner && list.length > 0) {
        if (list.length > 1) {
          throw new ConfigError(
            `${this.#where}: "backends.${format}" names "${wanted}", which runs the format with another backend's handler, but ${list.map((c) => this.#label(c.backend)).join(' and ')} both declare one; disable one of them`,
          );
        }
        pick = { backend: runner, handler: list[0]!.handler };
      }
      if (!pick) {
        const served =
          list.length > 0
            ? `the "${format}" format is served by ${list.map((c) => this.#label(c.backend)).join(' and ')}`
            : `no enabled backend serves the "${format}" format`;
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
        if (other)
          throw new ConfigError(
            `${this.#where}: the "${other}" and "${format}" formats both claim layers of media type "${type}"; disable one of their backends`,
          );
        byMediaType.set(type, format);
      }
    }
    return chosen;
  }
}

/** Whether `backend` runs models of `format` (its own handler's, or another's it `runs`). */
function runsFormat(backend: InferenceBackend, format: ModelFormat): boolean {
  return backend.formats.some((h) => h.name === format) || (backend.runs?.includes(format) ?? false);
}

/** {@link InferenceBackend.available}, a rejection as false; true for a backend without it. */
async function isAvailable(backend: InferenceBackend): Promise<boolean> {
  if (!backend.available) return true;
  try {
    return await backend.available();
  } catch {
    return false;
  }
}
