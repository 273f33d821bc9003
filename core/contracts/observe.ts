/**
 * What the appliance reports to observers (the `metrics` plugin, a vendor's telemetry): one record
 * per answered HTTP request (`hooks.requestObservers`, called by core) and the inference engine's
 * events (`hooks.inferenceObservers`, called by the engine). Labels stay bounded: a route is its
 * pattern (`/api/tags/:name`, never the raw path), a model is a resolved model name, and no prompt
 * or output text is ever part of an event. Observers are called synchronously on the hot path:
 * they only count.
 *
 * @module
 */
/** One answered HTTP request. */
export interface RequestRecord {
  method: string;
  /** The matched route's pattern, or `(unmatched)` for a path no route serves. */
  route: string;
  statusCode: number;
  /** From the request's arrival to the last byte of the answer. */
  seconds: number;
}

export interface RequestObserver {
  readonly name: string;
  onResponse(record: RequestRecord): void;
}

/**
 * An event of the inference engine; `model` is the resolved model name. `principal` (on `request`
 * and `finished`) is `Principal.id` of the credential that asked: an API key's name, `master` for
 * the master key, never a secret; bounded by the number of credentials, so observers may use it as
 * a label (`/system/usage`, the `metrics` plugin's `lia_key_*` series). Absent (the default) for
 * requests made outside an HTTP request.
 */
export type InferenceEvent =
  | { type: 'request'; model: string; kind: 'generate' | 'chat' | 'embed' | 'rerank' | 'transcribe' | 'speech'; principal?: string }
  /** Seconds from the request's arrival at the engine (queue and load included) to its first token. */
  | { type: 'first-token'; model: string; seconds: number }
  /** Seconds between two consecutive tokens of one generation. */
  | { type: 'token-gap'; model: string; seconds: number }
  /**
   * A generation or embedding ended; its token counts, and on a model loaded with speculative
   * decoding the tokens drafted for it and, of them, those accepted.
   */
  | { type: 'finished'; model: string; promptTokens: number; completionTokens: number; principal?: string; draftTokens?: number; draftAcceptedTokens?: number }
  | { type: 'loaded'; model: string; seconds: number }
  | { type: 'unloaded'; model: string }
  /** The model's runner process died. */
  | { type: 'crashed'; model: string }
  /**
   * An engine died of `signal` at both tries to load the model; `to` is the engine that gets the
   * model instead, null when none is left.
   */
  | { type: 'engine-fallback'; model: string; engine: string; signal: string; to: string | null };

export interface InferenceObserver {
  readonly name: string;
  onEvent(event: InferenceEvent): void;
}
