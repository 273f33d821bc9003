/**
 * Route schemas of the `/v1/` inference endpoints: the request bodies as OpenAI documents them.
 * Fastify validates a body before the handler runs; a wrong type or range is a 400
 * `invalid_request_error` whose `param` is the field's path (`messages[0].role`), and a string
 * is never taken for a number. `null` means "not set", as OpenAI accepts it; unknown fields are
 * accepted and ignored, so clients newer than this server keep working.
 *
 * The Responses API's body is in responses-schema.ts, built from the same pieces.
 *
 * Rules a schema cannot state stay in the translators: `n` > 1 and the like (valid requests this
 * server does not serve), rules between fields (`tool_choice` needs `tools`), token-array prompts
 * (a clearer message than a type error), and the content-part rules of messages.ts.
 *
 * @module
 */
import { Type, type Static, type TSchema } from '@sinclair/typebox';

export const open = { additionalProperties: true } as const;

/** `T` or `null`. */
const Nullable = <T extends TSchema>(schema: T) => Type.Unsafe<Static<T> | null>({ ...schema, nullable: true });
/** An optional field that may be `null`. */
export const Opt = <T extends TSchema>(schema: T) => Type.Optional(Nullable(schema));
/** One of a few strings (one `enum`, so an error lists them all). */
export const OneOf = <T extends string>(values: readonly T[]) => Type.Unsafe<T>({ type: 'string', enum: [...values] });
/** An optional one of a few strings, or `null`. */
export const OptOneOf = <T extends string>(values: readonly T[]) =>
  Type.Optional(Type.Unsafe<T | null>({ type: 'string', nullable: true, enum: [...values, null] }));
export const AnyObject = Type.Object({}, open);

export const Model = Type.String({ minLength: 1 });

/** What chat and legacy completions share. */
const Common = {
  model: Model,
  temperature: Opt(Type.Number({ minimum: 0, maximum: 2 })),
  top_p: Opt(Type.Number({ minimum: 0, maximum: 1 })),
  seed: Opt(Type.Integer()),
  presence_penalty: Opt(Type.Number({ minimum: -2, maximum: 2 })),
  frequency_penalty: Opt(Type.Number({ minimum: -2, maximum: 2 })),
  /**
   * Extension (not OpenAI's): the context length per sequence, Ollama's `options.num_ctx`. Unset:
   * the model's stored `num_ctx`, else the engine's `contextLength`.
   */
  num_ctx: Opt(Type.Integer({ minimum: 1, maximum: 16_777_216 })),
  /**
   * Extension (llama-server's): LoRA scales for this request, `id` indexing the model's adapters
   * (`lia show`), one left out is off. Unset: each adapter of the model at scale 1.
   */
  lora: Opt(Type.Array(Type.Object({ id: Type.Integer({ minimum: 0 }), scale: Type.Number() }, open), { maxItems: 64 })),
  /**
   * Extensions for speculative decoding (docs/engine.md): LM Studio's `draft_model` (a stored model
   * of the same vocabulary), Ollama's `draft_num_predict` (tokens drafted per step, 0: off) and
   * `draft_ngram` (n-gram lookup instead of a draft model). They size the load, like `num_ctx`.
   */
  draft_model: Opt(Type.String({ minLength: 1, maxLength: 512 })),
  draft_num_predict: Opt(Type.Integer({ minimum: 0, maximum: 64 })),
  draft_ngram: Opt(Type.Integer({ minimum: 0, maximum: 32 })),
  /** A string or a list of them (at most 64 of 1,024 characters: the engine matches each against the output). */
  stop: Type.Optional(Type.Union([Type.String({ maxLength: 1024 }), Type.Array(Type.String({ maxLength: 1024 }), { maxItems: 64 }), Type.Null()])),
  /** Only 1 is served (see docs/openai.md). */
  n: Opt(Type.Integer({ minimum: 1, maximum: 128 })),
  /** Defaults to false. */
  stream: Opt(Type.Boolean()),
  stream_options: Opt(Type.Object({ include_usage: Opt(Type.Boolean()) }, open)),
};

const ContentPart = Type.Object({ type: Type.String(), text: Type.Optional(Type.String()), refusal: Type.Optional(Type.String()) }, open);

const Message = Type.Object(
  {
    role: OneOf(['system', 'developer', 'user', 'assistant', 'tool', 'function'] as const),
    /** Text or content parts; `null` only for an assistant message with tool calls. */
    content: Type.Optional(Type.Union([Type.String(), Type.Array(ContentPart), Type.Null()])),
    tool_calls: Opt(
      Type.Array(
        Type.Object(
          {
            id: Type.Optional(Type.String()),
            function: Type.Object({ name: Type.String({ minLength: 1 }), arguments: Type.Optional(Type.Unknown()) }, open),
          },
          open,
        ),
      ),
    ),
    tool_call_id: Type.Optional(Type.String()),
    name: Type.Optional(Type.String()),
  },
  open,
);

/** A tool: `function` is served; other types (`custom`, newer ones) are left out by the translator. */
const Tool = Type.Object(
  {
    type: Type.String(),
    /** Required for `type: "function"` (checked by the translator, after the type). */
    function: Type.Optional(Type.Object({ name: Type.String({ minLength: 1 }), description: Opt(Type.String()), parameters: Opt(AnyObject) }, open)),
  },
  open,
);

/** `POST /v1/chat/completions`. */
export const ChatCompletionBody = Type.Object(
  {
    ...Common,
    messages: Type.Array(Message, { minItems: 1 }),
    max_tokens: Opt(Type.Integer({ minimum: 1 })),
    max_completion_tokens: Opt(Type.Integer({ minimum: 1 })),
    /** Log probabilities of the answer's tokens (`choices[].logprobs.content`). Defaults to false. */
    logprobs: Opt(Type.Boolean()),
    /** Alternatives per token with `logprobs` (0 to 20). Defaults to 0. */
    top_logprobs: Opt(Type.Integer({ minimum: 0, maximum: 20 })),
    /**
     * `none` keeps a thinking model's reasoning in `content`; any other value, like leaving it out,
     * returns it apart in `reasoning_content` (the level does not reach the prompt).
     */
    reasoning_effort: OptOneOf(['none', 'minimal', 'low', 'medium', 'high', 'xhigh'] as const),
    response_format: Opt(
      Type.Object(
        {
          type: OneOf(['text', 'json_object', 'json_schema'] as const),
          json_schema: Opt(Type.Object({ schema: Opt(AnyObject) }, open)),
        },
        open,
      ),
    ),
    tools: Opt(Type.Array(Tool)),
    /**
     * `none`, `auto`, `required`, `{type: "function", function: {name}}` or `{type: "allowed_tools",
     * allowed_tools: {mode, tools}}`; forcing another type (`custom`) is refused by the translator.
     */
    tool_choice: Type.Optional(
      Type.Union([
        OneOf(['none', 'auto', 'required'] as const),
        Type.Object(
          {
            type: Type.String(),
            function: Type.Optional(Type.Object({ name: Type.String({ minLength: 1 }) }, open)),
            allowed_tools: Type.Optional(Type.Object({ mode: Type.Optional(Type.String()), tools: Type.Array(AnyObject) }, open)),
          },
          open,
        ),
        Type.Null(),
      ]),
    ),
    // Spec fields with no effect here (docs/compatibility.md), typed so a wrong type is a 400.
    user: Opt(Type.String()),
    store: Opt(Type.Boolean()),
    metadata: Opt(AnyObject),
    service_tier: Opt(Type.String()),
    parallel_tool_calls: Opt(Type.Boolean()),
    prompt_cache_key: Opt(Type.String()),
    safety_identifier: Opt(Type.String()),
    logit_bias: Opt(Type.Record(Type.String(), Type.Number())),
    modalities: Opt(Type.Array(Type.String())),
    verbosity: Opt(Type.String()),
  },
  open,
);
export type ChatCompletionBody = Static<typeof ChatCompletionBody>;

/** `POST /v1/completions`. `max_tokens` defaults to 16. */
export const CompletionBody = Type.Object(
  {
    ...Common,
    /** Text or a list of texts (token arrays are refused by the translator). */
    prompt: Type.Union([Type.String(), Type.Array(Type.Unknown(), { minItems: 1 })]),
    suffix: Opt(Type.String()),
    echo: Opt(Type.Boolean()),
    max_tokens: Opt(Type.Integer({ minimum: 1 })),
    best_of: Opt(Type.Integer({ minimum: 0, maximum: 20 })),
    /** Log probabilities of each token and this many alternatives (legacy shape); unset: none. */
    logprobs: Opt(Type.Integer({ minimum: 0, maximum: 5 })),
  },
  open,
);
export type CompletionBody = Static<typeof CompletionBody>;

/** `POST /v1/embeddings`. `encoding_format` defaults to `float`. */
export const EmbeddingsBody = Type.Object(
  {
    model: Model,
    /** Text or up to 2048 texts (token arrays are refused by the translator). */
    input: Type.Union([Type.String({ minLength: 1 }), Type.Array(Type.Unknown(), { minItems: 1, maxItems: 2048 })]),
    encoding_format: OptOneOf(['float', 'base64'] as const),
    dimensions: Opt(Type.Integer({ minimum: 1 })),
  },
  open,
);
export type EmbeddingsBody = Static<typeof EmbeddingsBody>;
