/**
 * Compiled grammars for `format` (`"json"` or a JSON schema) and for forced tool calls, cached by
 * their source: compiling a schema costs milliseconds, and clients send the same one on every
 * request. The cache holds at most {@link MAX_CACHED} grammars and is emptied when full. A schema
 * that does not compile is the client's error (400).
 *
 * @module
 */
import type { GbnfJsonSchema, Llama, LlamaGrammar } from 'node-llama-cpp';
import type { OutputFormat, ToolDefinition } from 'lia/plugin/contracts';
import { RequestError } from './errors.js';
import type { ForcedChoice } from 'lia/prompts';
import { forcedToolSchema, ToolSchemaError } from './forced-tools.js';

const MAX_CACHED = 32;

export class Grammars {
  readonly #cache = new Map<string, Promise<LlamaGrammar>>();

  constructor(readonly llama: Llama) {}

  /** The grammar of a `format`, or undefined without one. */
  forFormat(format: OutputFormat | undefined): Promise<LlamaGrammar | undefined> {
    if (format === undefined) return Promise.resolve(undefined);
    if (format === 'json') return this.#cached('json', () => this.llama.getGrammarFor('json'), 'invalid format');
    return this.#cached(JSON.stringify(format), () => this.llama.createGrammarForJsonSchema<GbnfJsonSchema>(format as GbnfJsonSchema), 'invalid format');
  }

  /** The grammar of a forced tool call (see forced-tools.ts); a bad tool schema is a 400. */
  forToolCall(tools: readonly ToolDefinition[], choice: ForcedChoice): Promise<LlamaGrammar> {
    let schema: Record<string, unknown>;
    try {
      schema = forcedToolSchema(tools, choice);
    } catch (err) {
      throw err instanceof ToolSchemaError ? new RequestError(err.message) : err;
    }
    return this.#cached(
      `tool_choice:${JSON.stringify(schema)}`,
      () => this.llama.createGrammarForJsonSchema<GbnfJsonSchema>(schema as GbnfJsonSchema),
      'the tool schema cannot be compiled to a grammar',
    );
  }

  #cached(key: string, compile: () => Promise<unknown>, failure: string): Promise<LlamaGrammar> {
    let grammar = this.#cache.get(key);
    if (!grammar) {
      grammar = compile()
        .then((g) => g as LlamaGrammar)
        .catch((err: unknown) => {
          this.#cache.delete(key);
          throw new RequestError(`${failure}: ${(err as Error).message}`);
        });
      if (this.#cache.size >= MAX_CACHED) this.#cache.clear();
      this.#cache.set(key, grammar);
    }
    return grammar;
  }
}
