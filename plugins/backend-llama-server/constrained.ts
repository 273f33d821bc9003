/**
 * An answer under the engine plan's schema on llama-server (`ChatParams.constraint`: an output
 * format, or a forced tool call whose text the plan turns into the call), whatever the model's
 * chat template: a raw completion of the prompt the model's template makes of the conversation
 * and its tools (`/apply-template`), sampled under the schema (its GBNF, llama-server's `grammar`),
 * streamed as it is generated. Through the chat route
 * instead, llama-server would force a call only in the tool-call syntax of the templates it
 * recognises, and its chat parser holds back structured output until it parses, so an answer cut
 * by `num_predict` came back empty.
 *
 * @module
 */
import type { AnswerConstraint, ChatParams, GenerationEvent } from 'lia/engine';
import { openaiWire, type WireCall } from 'lia/openai-wire';
import type { RunCall } from './generate.js';
import type { LlamaServer } from './server.js';

/** The events of a chat request's answer under `constraint`. */
export async function* constrained(
  server: LlamaServer,
  model: string,
  p: ChatParams,
  constraint: AnswerConstraint,
  run: RunCall,
  signal: AbortSignal,
): AsyncIterable<GenerationEvent> {
  const prompt = await renderChat(server, model, p, signal);
  yield* run(() => constrainedCall(model, prompt, p, constraint.grammar));
}

/** The prompt the model's chat template makes of a request's messages and tools (`/apply-template`). */
export async function renderChat(server: LlamaServer, model: string, p: ChatParams, signal: AbortSignal): Promise<string> {
  const { format: _format, constraint: _constraint, toolChoice: _choice, ...rest } = p;
  const chat = openaiWire.chat(model, rest);
  const body = {
    messages: chat.body['messages'],
    ...(chat.body['tools'] ? { tools: chat.body['tools'] } : {}),
    ...(p.think === false ? { chat_template_kwargs: { enable_thinking: false } } : {}),
  };
  const rendered = (await server.fetchJson('POST', '/apply-template', body, signal)) as { prompt?: string };
  return rendered.prompt ?? '';
}

/** A raw completion of `prompt` under `grammar`, with the request's sampling and log probabilities. */
function constrainedCall(model: string, prompt: string, p: ChatParams, grammar: string): WireCall {
  const call = openaiWire.generate(model, { prompt, raw: true, options: p.options, ...(p.logprobs !== undefined ? { logprobs: p.logprobs } : {}) });
  call.body['grammar'] = grammar;
  return call;
}

/** A conversation's prompt length as the server evaluates it (BOS included). */
export async function promptLength(server: LlamaServer, model: string, p: ChatParams, signal: AbortSignal): Promise<number> {
  const prompt = await renderChat(server, model, p, signal);
  const { tokens } = (await server.fetchJson('POST', '/tokenize', { content: prompt, add_special: true, parse_special: true }, signal)) as {
    tokens?: unknown[];
  };
  return tokens?.length ?? 0;
}
