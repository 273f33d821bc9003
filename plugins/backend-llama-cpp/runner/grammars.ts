/**
 * Compiled grammars of answers (the engine's plan: `constraint`, an output format or a forced tool
 * call, as GBNF), cached by their text: parsing a grammar costs milliseconds, and clients send the
 * same schema on every request. The cache holds at most {@link MAX_CACHED} grammars and is emptied when full. A
 * schema that does not compile is the client's error (400).
 *
 * @module
 */
import type { Llama, LlamaGrammar } from 'node-llama-cpp';
import type { AnswerConstraint } from 'lia/engine';
import { RequestError } from './errors.js';

const MAX_CACHED = 32;

export class Grammars {
  readonly #cache = new Map<string, Promise<LlamaGrammar>>();

  constructor(readonly llama: Llama) {}

  /** The grammar of an answer's constraint, or undefined without one. */
  forAnswer(constraint: AnswerConstraint | undefined): Promise<LlamaGrammar | undefined> {
    if (constraint === undefined) return Promise.resolve(undefined);
    const { grammar } = constraint;
    return this.#cached(grammar, () => this.llama.createGrammar({ grammar }), 'invalid answer grammar');
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
