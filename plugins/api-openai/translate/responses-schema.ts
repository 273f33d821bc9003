/**
 * Route schema of `POST /v1/responses` (OpenAI's Responses API), built from the pieces of
 * schemas.ts and checked the same way: wrong types and ranges are a 400 naming the field, `null`
 * means "not set", unknown fields are accepted and ignored.
 *
 * The input items and tools are only shaped loosely here (an object with a `type`, a `role`):
 * which item and tool types this server serves, and what each needs, is the translator's rule
 * (responses-input.ts, responses-tools.ts). The lists the spec keeps growing (item, content part
 * and tool types, `include` values) are open strings: a type newer than this server is left out,
 * not refused. The fields that have no effect here are still typed, so a wrong type is a 400.
 *
 * @module
 */
import { Type, type Static } from '@sinclair/typebox';
import { AnyObject, Model, OneOf, Opt, open } from './schemas.js';

/** One item of `input`: a message (`role` + `content`), a `function_call` or a `function_call_output`. */
const InputItem = Type.Object(
  {
    type: Type.Optional(Type.String()),
    role: Type.Optional(Type.String()),
    content: Type.Optional(Type.Unknown()),
  },
  open,
);

/**
 * A tool: `function` tools are flat (`name`, `parameters` beside `type`), unlike chat completions;
 * a `namespace` holds function tools in `tools`; other types are tools this server cannot run.
 */
const Tool = Type.Object(
  {
    type: Type.String(),
    name: Type.Optional(Type.String({ minLength: 1 })),
    description: Opt(Type.String()),
    parameters: Opt(AnyObject),
    strict: Opt(Type.Boolean()),
    tools: Type.Optional(
      Type.Array(Type.Object({ type: Type.String(), name: Type.Optional(Type.String({ minLength: 1 })), parameters: Opt(AnyObject) }, open)),
    ),
  },
  open,
);

/** `text.format`: plain text (the default), any JSON, or JSON following a schema. */
const TextFormat = Type.Object(
  {
    type: OneOf(['text', 'json_object', 'json_schema'] as const),
    /** Required with `json_schema` (checked by the translator). */
    name: Type.Optional(Type.String({ minLength: 1 })),
    /** Required with `json_schema` (checked by the translator). */
    schema: Type.Optional(AnyObject),
    description: Opt(Type.String()),
    strict: Opt(Type.Boolean()),
  },
  open,
);

/** `POST /v1/responses`. */
export const ResponseBody = Type.Object(
  {
    model: Model,
    /** A string (one user message) or a list of items. */
    input: Type.Union([Type.String(), Type.Array(InputItem, { minItems: 1 })]),
    /** A system message put before the input. */
    instructions: Opt(Type.String()),
    /**
     * At least 1 (OpenAI asks for 16 or more; a local model has no reason to refuse fewer).
     * Unset: the model's default.
     */
    max_output_tokens: Opt(Type.Integer({ minimum: 1 })),
    temperature: Opt(Type.Number({ minimum: 0, maximum: 2 })),
    top_p: Opt(Type.Number({ minimum: 0, maximum: 1 })),
    tools: Opt(Type.Array(Tool)),
    /**
     * `none`, `auto`, `required`, `{type: "function", name}` or `{type: "allowed_tools", mode, tools}`;
     * a choice forcing a tool this server cannot run is refused by the translator.
     */
    tool_choice: Type.Optional(
      Type.Union([OneOf(['none', 'auto', 'required'] as const), Type.Object({ type: Type.String(), name: Type.Optional(Type.String()) }, open), Type.Null()]),
    ),
    text: Opt(Type.Object({ format: Opt(TextFormat), verbosity: Opt(OneOf(['low', 'medium', 'high'] as const)) }, open)),
    /**
     * `effort: "none"` keeps a thinking model's reasoning in the message; otherwise it is a
     * `reasoning` item (the level is not applied). `summary` has no effect.
     */
    reasoning: Opt(Type.Object({ effort: Opt(Type.String()), summary: Opt(Type.String()), generate_summary: Opt(Type.String()) }, open)),
    /** Defaults to false. */
    stream: Opt(Type.Boolean()),
    /** Accepted; nothing is ever stored (the server is stateless). */
    store: Opt(Type.Boolean()),
    /** Refused when set: there are no stored responses to continue. */
    previous_response_id: Opt(Type.String()),
    /** Refused when set, for the same reason. */
    conversation: Type.Optional(Type.Unknown()),
    /** Refused when true: every response is answered in the request that asks for it. */
    background: Opt(Type.Boolean()),
    /** Echoed in the response. Up to 16 string values, as OpenAI allows. */
    metadata: Opt(Type.Record(Type.String(), Type.String(), { maxProperties: 16 })),
    /** Echoed in the response. */
    user: Opt(Type.String()),
    /** Echoed in the response; one call per answer either way (see docs/openai.md). Defaults to true. */
    parallel_tool_calls: Opt(Type.Boolean()),
    // Spec fields with no effect here (docs/compatibility.md), typed so a wrong type is a 400.
    include: Opt(Type.Array(Type.String())),
    prompt_cache_key: Opt(Type.String()),
    prompt_cache_retention: Opt(Type.String()),
    safety_identifier: Opt(Type.String()),
    service_tier: Opt(Type.String()),
    truncation: Opt(Type.String()),
    top_logprobs: Opt(Type.Integer({ minimum: 0, maximum: 20 })),
    max_tool_calls: Opt(Type.Integer({ minimum: 1 })),
    stream_options: Opt(AnyObject),
    prompt: Opt(AnyObject),
  },
  open,
);
export type ResponseBody = Static<typeof ResponseBody>;
