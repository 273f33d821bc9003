/**
 * Route schemas of `/v1/messages` and `/v1/messages/count_tokens`: the request bodies as
 * Anthropic documents them. Fastify validates a body before the handler runs; a wrong type,
 * range or a missing required field (`max_tokens`) is a 400 `invalid_request_error` naming the
 * field. Fields without effect here (`metadata`, `service_tier`, `context_management`,
 * `cache_control` on any block, …) are typed where they are named, and fields newer than this
 * server are accepted and ignored, so clients newer than this server keep working. The lists
 * Anthropic keeps growing (block types, tool types, thinking types) are open strings.
 *
 * The content-block rules (which block types each role may carry, images refused) stay in
 * messages.ts, where the message can name the exact block.
 *
 * @module
 */
import { Type, type Static } from '@sinclair/typebox';

const open = { additionalProperties: true } as const;

/** A content block: its `type` decides which other fields it needs (checked by the translator). */
const Block = Type.Object({ type: Type.String({ minLength: 1 }) }, open);

/**
 * A turn: `user` or `assistant`, or `system` (what Claude Code sends for instructions in the middle
 * of a conversation; `developer` is taken as `system`).
 */
const Message = Type.Object(
  {
    role: Type.Unsafe<'user' | 'assistant' | 'system' | 'developer'>({ type: 'string', enum: ['user', 'assistant', 'system', 'developer'] }),
    content: Type.Union([Type.String(), Type.Array(Block)]),
  },
  open,
);

/** `system`: a string or a list of blocks (their `text` joined; blocks of other types left out). */
const System = Type.Union([Type.String(), Type.Array(Type.Object({ type: Type.String(), text: Type.Optional(Type.String()) }, open))]);

const Tool = Type.Object(
  {
    /**
     * Unset or `custom`: a custom tool (`name`, `input_schema` required, checked by the translator).
     * Other types are server or built-in tools (`web_search_…`, `bash_…`), left out of the prompt.
     */
    type: Type.Optional(Type.String()),
    name: Type.Optional(Type.String({ minLength: 1 })),
    description: Type.Optional(Type.String()),
    input_schema: Type.Optional(Type.Object({}, open)),
  },
  open,
);

const ToolChoice = Type.Union([
  Type.Object({ type: Type.Literal('auto') }, open),
  Type.Object({ type: Type.Literal('any') }, open),
  Type.Object({ type: Type.Literal('none') }, open),
  Type.Object({ type: Type.Literal('tool'), name: Type.String({ minLength: 1 }) }, open),
]);

/** `thinking`: `enabled` (with a `budget_tokens`), `adaptive` or `disabled`. */
const Thinking = Type.Object({ type: Type.String(), budget_tokens: Type.Optional(Type.Integer({ minimum: 0 })) }, open);

/** `output_config`: `effort` (a level) and `format` (`{type: "json_schema", schema}`). */
const OutputConfig = Type.Object(
  {
    effort: Type.Optional(Type.String()),
    format: Type.Optional(Type.Union([Type.Object({ type: Type.String(), schema: Type.Optional(Type.Object({}, open)) }, open), Type.Null()])),
  },
  open,
);

/** What both endpoints take: the conversation, its tools, and the settings that shape the prompt. */
const Conversation = {
  model: Type.String({ minLength: 1 }),
  messages: Type.Array(Message, { minItems: 1 }),
  system: Type.Optional(System),
  tools: Type.Optional(Type.Array(Tool)),
  tool_choice: Type.Optional(ToolChoice),
  /** `enabled` or `adaptive`: a thinking model's reasoning as a thinking block (`budget_tokens` is not applied). */
  thinking: Type.Optional(Thinking),
  /** `format` is honoured (a JSON schema grammar); `effort` has no effect. */
  output_config: Type.Optional(OutputConfig),
  // No effect here (docs/anthropic.md), typed so a wrong type is a 400.
  metadata: Type.Optional(Type.Object({}, open)),
  service_tier: Type.Optional(Type.String()),
  context_management: Type.Optional(Type.Union([Type.Object({}, open), Type.Null()])),
  container: Type.Optional(Type.Union([Type.String(), Type.Object({}, open), Type.Null()])),
  mcp_servers: Type.Optional(Type.Array(Type.Object({}, open))),
};

/** `POST /v1/messages`. `stream` defaults to false; unset sampling fields are left to the model. */
export const MessagesBody = Type.Object(
  {
    ...Conversation,
    /** Required, as Anthropic requires it: the most tokens to generate. */
    max_tokens: Type.Integer({ minimum: 1 }),
    stop_sequences: Type.Optional(Type.Array(Type.String({ maxLength: 1024 }), { maxItems: 64 })),
    temperature: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
    top_p: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
    top_k: Type.Optional(Type.Integer({ minimum: 0 })),
    stream: Type.Optional(Type.Boolean()),
  },
  open,
);
export type MessagesBody = Static<typeof MessagesBody>;

/** `POST /v1/messages/count_tokens`. */
export const CountTokensBody = Type.Object(Conversation, open);
export type CountTokensBody = Static<typeof CountTokensBody>;

/** A content block as the schema leaves it (a `type` and anything else). */
export type ContentBlock = Static<typeof Block> & Record<string, unknown>;
