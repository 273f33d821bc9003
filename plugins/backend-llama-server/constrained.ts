/**
 * Chat answers under a constraint on llama-server: an output format (`format`: JSON, or a JSON
 * schema) and a forced tool call (`toolChoice` `'required'` or a named tool), whatever the
 * model's chat template. Both are sent as a raw completion of the prompt the model's chat template
 * makes of the conversation and its tools (`/apply-template`), sampled under a JSON schema
 * (llama-server's `json_schema`, which llama.cpp compiles into a grammar). Through the chat route
 * instead, llama-server forces a call only in the tool-call syntax of the templates it recognises
 * (a model whose template has none answers in text), and its chat parser holds back structured
 * output until it parses, so an answer cut by `num_predict` came back empty.
 *
 * A format's answer streams as it is generated: JSON (`format: 'json'`, an object) or what the
 * schema admits. A forced call is made as backend-llama-cpp makes it, and as vLLM does; the
 * schema admits only a call:
 *
 * - a named tool → the tool's `parameters`; the whole answer is the call's arguments;
 * - required → `{"name": <one of the tools>, "arguments": <its parameters>}`, one `oneOf` branch
 *   per tool.
 *
 * The text never reaches the client: the answer ends with one `tool_calls` event, or, cut by
 * `num_predict` before the call was complete, with `length` and neither text nor call. A schema
 * llama.cpp cannot compile is llama-server's 400, passed on.
 *
 * @module
 */
import { Errors } from 'lia/plugin';
import type { ChatParams, GenerationEvent, ToolCall, ToolDefinition } from 'lia/plugin/contracts';
import { forcedCallOf, type ForcedChoice } from 'lia/prompts';
import { openaiWire, type WireCall } from 'lia/utils';
import type { RunCall } from './generate.js';
import type { LlamaServer } from './server.js';

/** The events of a chat request with an output format: its answer under the format's schema. */
export async function* formatted(server: LlamaServer, model: string, p: ChatParams, run: RunCall, signal: AbortSignal): AsyncIterable<GenerationEvent> {
  const prompt = await renderChat(server, model, p, signal);
  const schema = p.format === 'json' || p.format === undefined ? { type: 'object' } : p.format;
  yield* run(() => constrainedCall(model, prompt, p, schema));
}

/** The events of a chat request whose tool choice forces a call (see the module comment). */
export async function* forcedCall(
  server: LlamaServer,
  model: string,
  p: ChatParams,
  choice: ForcedChoice,
  run: RunCall,
  signal: AbortSignal,
): AsyncIterable<GenerationEvent> {
  const tools = p.tools ?? [];
  const schema = callSchema(tools, choice);
  const prompt = await renderChat(server, model, p, signal);
  let text = '';
  for await (const event of run(() => constrainedCall(model, prompt, p, schema))) {
    if (event.type === 'token') text += event.text;
    else if (event.type === 'done') {
      const calls = event.reason === 'length' ? undefined : parseCall(text, tools, choice);
      if (calls) yield { type: 'tool_calls', calls };
      yield calls || event.reason === 'length' ? event : { ...event, reason: 'length' };
    } else yield event;
  }
}

/** The prompt the model's chat template makes of a request's messages and tools (`/apply-template`). */
export async function renderChat(server: LlamaServer, model: string, p: ChatParams, signal: AbortSignal): Promise<string> {
  const { format: _format, ...rest } = p;
  const chat = openaiWire.chat(model, { ...rest, toolChoice: 'auto' });
  const body = {
    messages: chat.body['messages'],
    ...(chat.body['tools'] ? { tools: chat.body['tools'] } : {}),
    ...(p.think === false ? { chat_template_kwargs: { enable_thinking: false } } : {}),
  };
  const rendered = (await server.fetchJson('POST', '/apply-template', body, signal)) as { prompt?: string };
  return rendered.prompt ?? '';
}

/** A raw completion of `prompt` under `schema`, with the request's sampling and log probabilities. */
function constrainedCall(model: string, prompt: string, p: ChatParams, schema: unknown): WireCall {
  const call = openaiWire.generate(model, { prompt, raw: true, options: p.options, ...(p.logprobs !== undefined ? { logprobs: p.logprobs } : {}) });
  call.body['json_schema'] = schema;
  return call;
}

/** The JSON schema a forced answer must match. */
function callSchema(tools: readonly ToolDefinition[], choice: ForcedChoice): Record<string, unknown> {
  if (tools.length === 0) throw Errors.badRequest('a required or named tool choice needs tools', { param: 'tool_choice' });
  const params = (t: ToolDefinition) =>
    t.function.parameters && Object.keys(t.function.parameters).length > 0 ? t.function.parameters : { type: 'object', properties: {} };
  if (choice !== 'required') {
    const tool = tools.find((t) => t.function.name === choice.name);
    if (!tool) throw Errors.badRequest(`tool choice "${choice.name}" is not one of the tools`, { param: 'tool_choice' });
    return params(tool);
  }
  const branches = tools.map((t) => ({
    type: 'object',
    properties: { name: { const: t.function.name }, arguments: params(t) },
    required: ['name', 'arguments'],
    additionalProperties: false,
  }));
  return branches.length === 1 ? branches[0]! : { oneOf: branches };
}

/** The call a complete forced answer holds; undefined when the text is not one. */
function parseCall(text: string, tools: readonly ToolDefinition[], choice: ForcedChoice): ToolCall[] | undefined {
  const call = forcedCallOf(text, tools, choice);
  return call && [{ function: { index: 0, name: call.name, arguments: call.arguments } }];
}
