/**
 * Route schemas of `/v1/messages` and `/v1/messages/count_tokens`: the request bodies as
 * Anthropic documents them. Fastify validates a body before the handler runs; a wrong type,
 * range or a missing required field (`max_tokens`) is a 400 `invalid_request_error` naming the
 * field. Unknown fields (`metadata`, `service_tier`, `cache_control` on blocks) are
 * accepted and ignored, so clients newer than this server keep working.
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

const Message = Type.Object(
  {
    role: Type.Unsafe<'user' | 'assistant'>({ type: 'string', enum: ['user', 'assistant'] }),
    content: Type.Union([Type.String(), Type.Array(Block)]),
  },
  open,
);

/** `system`: a string or a list of text blocks. */
const System = Type.Union([Type.String(), Type.Array(Type.Object({ type: Type.Literal('text'), text: Type.String() }, open))]);

const Tool = Type.Object(
  {
    /** Custom tools only; server tools (`web_search_…`, `bash_…`) are refused by the translator. */
    type: Type.Optional(Type.String()),
    name: Type.String({ minLength: 1 }),
    description: Type.Optional(Type.String()),
    input_schema: Type.Object({}, open),
  },
  open,
);

const ToolChoice = Type.Union([
  Type.Object({ type: Type.Literal('auto') }, open),
  Type.Object({ type: Type.Literal('any') }, open),
  Type.Object({ type: Type.Literal('none') }, open),
  Type.Object({ type: Type.Literal('tool'), name: Type.String({ minLength: 1 }) }, open),
]);

/** What both endpoints take: the conversation and its tools. */
const Conversation = {
  model: Type.String({ minLength: 1 }),
  messages: Type.Array(Message, { minItems: 1 }),
  system: Type.Optional(System),
  tools: Type.Optional(Type.Array(Tool)),
  tool_choice: Type.Optional(ToolChoice),
};

/** `POST /v1/messages`. `stream` defaults to false; unset sampling fields are left to the model. */
export const MessagesBody = Type.Object(
  {
    ...Conversation,
    /** Required, as Anthropic requires it: the most tokens to generate. */
    max_tokens: Type.Integer({ minimum: 1 }),
    stop_sequences: Type.Optional(Type.Array(Type.String())),
    temperature: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
    top_p: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
    top_k: Type.Optional(Type.Integer({ minimum: 0 })),
    stream: Type.Optional(Type.Boolean()),
    /** `enabled` or `adaptive`: a thinking model's reasoning as a thinking block (`budget_tokens` is not applied). */
    thinking: Type.Optional(Type.Object({ type: Type.String() }, { additionalProperties: true })),
  },
  open,
);
export type MessagesBody = Static<typeof MessagesBody>;

/** `POST /v1/messages/count_tokens`. */
export const CountTokensBody = Type.Object(Conversation, open);
export type CountTokensBody = Static<typeof CountTokensBody>;

/** A content block as the schema leaves it (a `type` and anything else). */
export type ContentBlock = Static<typeof Block> & Record<string, unknown>;
