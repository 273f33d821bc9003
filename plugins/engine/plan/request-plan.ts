/**
 * The request plan: what a chat or generate request asks of an engine, decided once, before a
 * model is loaded for it, the way llama.cpp's server turns a request into its task parameters in
 * one place. Every engine then only carries the plan out:
 *
 * - **tools**: `none` drops them, `auto` hands them over, a forced choice (`required`, a named
 *   tool) is checked against them here and becomes an answer schema (answer-schema.ts) whose
 *   text the plan turns into the call (forced-call.ts);
 * - **output format**: `json` or a schema, rewritten into the subset every GGUF engine compiles
 *   alike (answer-schema.ts); beside a forced call it has nothing to shape (the answer is the
 *   call, as OpenAI answers), beside `auto` tools the answer is in the format;
 * - **thinking**: split into `thinking` and `token` events (thinking.ts) when asked of a model
 *   that thinks, switched off in the prompt with `think: false`;
 * - **context**: a prompt longer than the loaded context grows it, and past what the model and the
 *   memory budget allow, a conversation loses its oldest messages (context-fit.ts).
 *
 * A remote model (one a backend forwards to another server) gets the format and the tool choice
 * as the client sent them: the server it forwards to plans its own answer.
 *
 * @module
 */
import { Errors } from 'lia/plugin';
import type { AnswerConstraint, ChatParams, GenerationEvent, OutputFormat, SamplingOptions, Think, ToolChoice, ToolDefinition } from '../public.js';
import type { ResolvedModel } from 'lia/model-store';
import { splitThinking } from '../thinking.js';
import { formatSchema, forcedCallSchema } from './answer-schema.js';
import { asForcedCall, type ForcedChoice } from './forced-call.js';
import { answerGrammar } from './grammar.js';

/** What a plan adds to the messages and options of a chat: the fields the backend gets. */
export type PlannedFields = Pick<ChatParams, 'tools' | 'toolChoice' | 'format' | 'constraint' | 'think' | 'logprobs' | 'whole'>;

/** A planned request: the backend's fields, and how its events are read back. */
export interface Plan {
  fields: PlannedFields;
  /** The backend's events as the client gets them: a forced call's text made the call, thinking split. */
  read(events: AsyncIterable<GenerationEvent>): AsyncIterable<GenerationEvent>;
  /** The request's sampling options as the backend gets them: a forced call has no stop sequences (they would cut its JSON). */
  options(options: SamplingOptions): SamplingOptions;
}

const asGiven = (options: SamplingOptions): SamplingOptions => options;
const withoutStops = ({ stop: _stop, ...options }: SamplingOptions): SamplingOptions => options;

/** The parts of a chat request a plan decides. */
export interface ChatAsk {
  tools?: ToolDefinition[] | undefined;
  toolChoice?: ToolChoice | undefined;
  format?: OutputFormat | null | '' | undefined;
  think?: Think | undefined;
  logprobs?: number | undefined;
  stream?: boolean | undefined;
}

/** Plans a chat on `model` (`asked`: the name the client used, for errors). */
export function planChat(model: ResolvedModel, asked: string, ask: ChatAsk): Plan {
  const { tools, choice } = toolChoice(ask.tools, ask.toolChoice);
  const { format, common, readThinking } = planCommon(model, asked, ask);
  if (model.remote) {
    const toolChoiceField = choice === undefined ? {} : { toolChoice: choice };
    return {
      fields: { ...common, ...(tools ? { tools } : {}), ...toolChoiceField, ...(format !== undefined ? { format } : {}) },
      read: readThinking,
      options: asGiven,
    };
  }
  const constraint = choice !== undefined ? constrained(forcedCallSchema(tools!, choice)) : constraintOf(format);
  const fields: PlannedFields = { ...common, ...(tools ? { tools } : {}), ...(constraint ? { constraint } : {}) };
  if (choice === undefined) return { fields, read: readThinking, options: asGiven };
  return { fields, read: (events) => asForcedCall(events, tools!, choice), options: withoutStops };
}

/** Plans a generate: its output format, thinking, log probabilities (a generate has no tools). */
export function planGenerate(model: ResolvedModel, asked: string, ask: Omit<ChatAsk, 'tools' | 'toolChoice'>): Plan {
  const { format, common, readThinking } = planCommon(model, asked, ask);
  const constraint = model.remote ? undefined : constraintOf(format);
  const formatField = constraint ? { constraint } : format !== undefined ? { format } : {};
  return { fields: { ...common, ...formatField }, read: readThinking, options: asGiven };
}

/** What a chat and a generate plan alike: the format given (none for `null` or `""`), log probabilities, a whole answer, thinking. */
function planCommon(
  model: ResolvedModel,
  asked: string,
  ask: Omit<ChatAsk, 'tools' | 'toolChoice'>,
): { format: OutputFormat | undefined; common: PlannedFields; readThinking: Plan['read'] } {
  const split = thinks(model, ask.think, asked);
  return {
    format: ask.format === null || ask.format === '' ? undefined : ask.format,
    common: {
      ...(ask.logprobs !== undefined ? { logprobs: ask.logprobs } : {}),
      ...(ask.stream === false ? { whole: true } : {}),
      ...thinkField(ask.think, split),
    },
    readThinking: (events) => (split ? splitThinking(events) : events),
  };
}

/** An output format as the schema its answer is sampled under; none without a format. */
function constraintOf(format: OutputFormat | undefined): AnswerConstraint | undefined {
  if (format === undefined) return undefined;
  return constrained(format === 'json' ? 'json' : formatSchema(format));
}

function constrained(schema: AnswerConstraint['schema']): AnswerConstraint {
  return { schema, grammar: answerGrammar(schema) };
}

/**
 * The tools the backend gets and the forced choice, if any: `none` (or no tools) drops them; a
 * forced choice needs tools, and a named one one of them.
 */
export function toolChoice(tools: ToolDefinition[] | undefined, choice: ToolChoice | undefined): { tools?: ToolDefinition[]; choice?: ForcedChoice } {
  const forced = choice === 'required' || (typeof choice === 'object' && choice !== null);
  if (choice === 'none' || !tools || tools.length === 0) {
    if (forced) throw Errors.badRequest('a required or named tool choice needs tools', { param: 'tool_choice' });
    return {};
  }
  if (choice === undefined || choice === 'auto') return { tools };
  if (choice === 'required') return { tools, choice: 'required' };
  if (typeof choice === 'object' && choice !== null && typeof choice.name === 'string') {
    if (!tools.some((t) => t.function.name === choice.name)) {
      throw Errors.badRequest(`tool choice "${choice.name}" is not one of the tools`, { param: 'tool_choice' });
    }
    return { tools, choice: { name: choice.name } };
  }
  throw Errors.badRequest(`invalid tool choice: ${JSON.stringify(choice)}`, { param: 'tool_choice' });
}

/**
 * Whether the output is split into thinking and answer (see thinking.ts): `think` true or a level
 * on a model with the `thinking` capability (without it: Ollama's 400), or `'auto'` where it has it.
 */
function thinks(model: ResolvedModel, think: Think | undefined, asked: string): boolean {
  if (think === undefined || think === false) return false;
  const capable = model.capabilities.includes('thinking');
  if (think === 'auto') return capable;
  if (!capable) throw Errors.badRequest(`"${asked}" does not support thinking`, { param: 'think' });
  return true;
}

/**
 * `think` as the backend gets it: false when the request switched thinking off (the prompt then
 * asks the model not to think, where its template can), true when the output is split, else unset
 * (the template's default).
 */
function thinkField(think: Think | undefined, split: boolean): { think?: boolean } {
  if (think === false) return { think: false };
  return split ? { think: true } : {};
}
