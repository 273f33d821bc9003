/**
 * Route schemas of the native inference routes (Ollama's request shapes). Fastify validates each
 * body before the handler runs; a wrong type is a 400 `{"error":"\"prompt\" must be a string"}`
 * that names the field, and a string is never taken for a number. `null` means "not set", as in
 * Ollama (Go leaves the field at its zero value); unknown fields are accepted and ignored, since
 * clients send fields of newer and older Ollama versions.
 *
 * What a schema cannot say stays in the handler: a role's spelling (Ollama lower-cases it), tool
 * call arguments sent as a JSON string, a `keep_alive` duration's syntax, the keys of `options`
 * (shared with a model's stored parameters, see request-options.ts), `images` (their format and
 * size, and the model's `vision` capability) and `think` (checked against the model's
 * capabilities by the engine).
 *
 * @module
 */
import { Type, type Static, type TSchema } from '@sinclair/typebox';

const open = { additionalProperties: true } as const;

/** `T` or `null`. */
const Nullable = <T extends TSchema>(schema: T) => Type.Unsafe<Static<T> | null>({ ...schema, nullable: true });
const Text = Type.Optional(Nullable(Type.String()));
const Flag = Type.Optional(Nullable(Type.Boolean()));
const AnyObject = Type.Object({}, open);

/** Ollama's texts, which clients and tests match on: a missing or empty model. */
const Model = Type.String({ minLength: 1, errorMessage: { minLength: 'model is required' } });

/** Seconds or a duration string (`"5m"`); the string is parsed by keep-alive.ts. */
const KeepAlive = Type.Optional(
  Type.Union([Type.Number(), Type.String(), Type.Null()], {
    errorMessage: 'invalid keep_alive: expected a number of seconds or a duration such as "5m"',
  }),
);

/** Sampling options: an object whose known keys request-options.ts checks. */
const Options = Type.Optional(Nullable(AnyObject));

/** `"json"`, a JSON schema object, or nothing (`""`, `null`). */
const Format = Type.Optional(
  Type.Union([Type.Literal('json'), Type.Literal(''), AnyObject, Type.Null()], {
    errorMessage: 'invalid format: expected "json" or a valid JSON Schema object',
  }),
);

const Think = Type.Optional(
  Type.Union([Type.Boolean(), Type.Literal('low'), Type.Literal('medium'), Type.Literal('high'), Type.Literal('max'), Type.Null()], {
    errorMessage: 'invalid think value: expected true, false, "low", "medium", "high" or "max"',
  }),
);

/** Alternatives per token with `logprobs` (Ollama's range). */
const TopLogprobs = Type.Optional(Nullable(Type.Integer({ minimum: 0, maximum: 20, errorMessage: 'top_logprobs must be between 0 and 20' })));

/**
 * Base64 images; the engine checks each (format, size) and the model's `vision` capability. An
 * entry that is an audio file is a clip (body.ts `media`), as Ollama takes audio.
 */
const Images = Type.Optional(Nullable(Type.Array(Type.String())));

/** Base64 audio clips in any container the engine decodes; the model needs the `audio` capability. */
const Audio = Type.Optional(Nullable(Type.Array(Type.String())));

const ToolCall = Type.Object(
  {
    function: Type.Object(
      {
        name: Type.String({ minLength: 1 }),
        /** An object, or the same as a JSON string (parsed by the handler). */
        arguments: Type.Optional(Type.Union([AnyObject, Type.String(), Type.Null()])),
      },
      open,
    ),
  },
  open,
);

/** A chat message; `role` is checked after lower-casing (Ollama accepts `"User"`). */
const Message = Type.Object(
  {
    role: Type.String(),
    content: Text,
    images: Images,
    audio: Audio,
    tool_calls: Type.Optional(Nullable(Type.Array(ToolCall))),
    tool_name: Text,
  },
  open,
);

const Tool = Type.Object(
  {
    type: Text,
    function: Type.Object({ name: Type.String({ minLength: 1 }), description: Text, parameters: Type.Optional(Nullable(AnyObject)) }, open),
  },
  open,
);

/** `POST /api/generate`. `stream` defaults to true, `raw` to false. */
export const GenerateBody = Type.Object(
  {
    model: Model,
    prompt: Text,
    suffix: Text,
    system: Text,
    template: Text,
    raw: Flag,
    stream: Flag,
    format: Format,
    keep_alive: KeepAlive,
    options: Options,
    think: Think,
    logprobs: Flag,
    top_logprobs: TopLogprobs,
    images: Images,
    audio: Audio,
    /** Token ids from a previous answer's `context` (Ollama's deprecated way to continue). */
    context: Type.Optional(Nullable(Type.Array(Type.Integer({ minimum: 0 })))),
  },
  open,
);
export type GenerateBody = Static<typeof GenerateBody>;

/** `POST /api/chat`. `stream` defaults to true; no messages only loads (or unloads) the model. */
export const ChatBody = Type.Object(
  {
    model: Model,
    messages: Type.Optional(Nullable(Type.Array(Message))),
    tools: Type.Optional(Nullable(Type.Array(Tool))),
    stream: Flag,
    format: Format,
    keep_alive: KeepAlive,
    options: Options,
    think: Think,
    logprobs: Flag,
    top_logprobs: TopLogprobs,
  },
  open,
);
export type ChatBody = Static<typeof ChatBody>;
export type ChatBodyMessage = Static<typeof Message>;
export type ChatBodyTool = Static<typeof Tool>;

/** `POST /api/embed`. `input` is a string or a list of them; `truncate` defaults to true. */
export const EmbedBody = Type.Object(
  {
    model: Model,
    input: Type.Optional(Type.Union([Type.String(), Type.Array(Type.String()), Type.Null()], { errorMessage: 'invalid input type' })),
    truncate: Flag,
    dimensions: Type.Optional(Nullable(Type.Integer({ minimum: 1 }))),
    keep_alive: KeepAlive,
    options: Options,
  },
  open,
);
export type EmbedBody = Static<typeof EmbedBody>;

/** `POST /api/embeddings` (legacy): one prompt, one raw vector. */
export const EmbeddingsBody = Type.Object({ model: Model, prompt: Text, keep_alive: KeepAlive, options: Options }, open);
export type EmbeddingsBody = Static<typeof EmbeddingsBody>;

/** `POST /tokenize` (llama-server's fields). */
export const TokenizeBody = Type.Object(
  { model: Model, content: Type.String(), add_special: Flag, parse_special: Flag, with_pieces: Flag, keep_alive: KeepAlive },
  open,
);
export type TokenizeBody = Static<typeof TokenizeBody>;

/** `POST /detokenize`: token ids (llama-server's fields). */
export const DetokenizeBody = Type.Object({ model: Model, tokens: Type.Array(Type.Integer({ minimum: 0 })), keep_alive: KeepAlive }, open);
export type DetokenizeBody = Static<typeof DetokenizeBody>;

/** `GET /api/version`. */
export const VersionResponse = Type.Object({ version: Type.String(), lia_version: Type.String() });

/** `GET /api/ps`: each loaded model (details are the store's, or null; `engine` and `device` are LIA's own fields: the backend serving it, and where: `cpu`, the GPU the offload plan chose such as `Vulkan0`, or `gpu` where the backend placed layers by itself). */
export const PsResponse = Type.Object({
  models: Type.Array(
    Type.Object({
      name: Type.String(),
      model: Type.String(),
      size: Type.Number(),
      digest: Type.String(),
      details: Nullable(AnyObject),
      expires_at: Type.String(),
      size_vram: Type.Number(),
      context_length: Type.Number(),
      engine: Type.String(),
      device: Type.String(),
      parallel: Type.Integer(),
      running: Type.Integer(),
      queued: Type.Integer(),
      kv_cache_type: Type.String(),
      flash_attention: Type.String(),
      draft_model: Type.Optional(Type.String()),
      draft_ngram: Type.Optional(Type.Integer()),
      draft_num_predict: Type.Optional(Type.Integer()),
    }),
  ),
});
