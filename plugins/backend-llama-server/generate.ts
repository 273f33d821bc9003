/**
 * Ollama's `/api/generate` on llama-server: what the OpenAI wire cannot carry, done here with
 * llama-server's own endpoints, so a generation asks the same of either local engine.
 *
 * - A model with no template, in its weights or its store, takes the prompt as it is (Ollama's
 *   default template `{{ .Prompt }}`, what node-llama-cpp does).
 * - A request `template` (Ollama Go-template text) of the simple kind generate-style templates
 *   are is rendered here (`renderGoTemplate`) and sent as a raw prompt; one it cannot render
 *   (ranges over `.Messages`, functions) leaves the prompt on the model's own chat template.
 * - `context`, the token ids of an earlier exchange, is evaluated before the prompt: the prompt
 *   goes to `/v1/completions` as BOS, the ids, then the prompt rendered by the model's template
 *   (`/apply-template`), the mixed prompt llama-server takes. A `format` goes the same way
 *   (without the ids), so that its JSON streams as it is generated.
 * - Every templated generation ends with its own `context` (the prompt as evaluated without BOS,
 *   then the answer), as Ollama returns it: the rendered prompt and the answer's text are counted
 *   by `/tokenize` once the answer is done, so the first token does not wait for them. The
 *   answer's ids are its text tokenized again, which decodes to the same text.
 *
 * @module
 */
import { Errors } from 'lia/plugin';
import type { GenerateParams, GenerationEvent } from 'lia/engine';
import { renderGoTemplate } from 'lia/gguf';
import { openaiWire, type WireCall } from 'lia/openai-wire';
import { checkTokenIds, tokenize } from './ranking.js';
import type { LlamaServer } from './server.js';

/** Runs one call and yields its events (the served model's stream, with slot placement). */
export type RunCall = (build: () => WireCall) => AsyncIterable<GenerationEvent>;

/** The events of a generation, with `template` and `context` handled as the module says. */
export async function* generateOn(
  server: LlamaServer,
  model: string,
  params: GenerateParams,
  run: RunCall,
  signal: AbortSignal,
  untemplated = false,
): AsyncIterable<GenerationEvent> {
  const { context = [], ...rest } = params;
  const p = withTemplate(rest, untemplated);
  const templated = !params.raw;
  let prompt: string | undefined = p.raw && templated ? p.prompt : undefined;
  // The plan's answer grammar, on whichever route the request goes.
  const grammar = p.constraint?.grammar;
  const constrain = (call: WireCall): WireCall => {
    if (grammar !== undefined) call.body['grammar'] = grammar;
    return call;
  };
  let build = () => constrain(openaiWire.generate(model, p));
  // The OpenAI wire cannot carry context; an answer grammar on the chat route would have
  // llama-server's chat parser hold the JSON back until it parses (constrained.ts): both go as a raw
  // completion of the prompt the model's template makes.
  if (context.length > 0 || (grammar !== undefined && !p.raw)) {
    if (params.raw) throw Errors.badRequest('raw mode does not support template, system, or context', { param: 'context' });
    if (p.images?.length || p.audio?.length)
      throw Errors.badRequest('images and audio cannot be combined with context or format on this engine: send them to /api/chat', { param: 'images' });
    checkTokenIds(server, context, 'context');
    const text = prompt ?? (await applyTemplate(server, p, signal));
    prompt = text;
    build = () => {
      const call = openaiWire.generate(model, { ...p, raw: true, prompt: text });
      // An empty first string gives the model's BOS, then the earlier exchange, then the new turn.
      if (context.length > 0) call.body['prompt'] = ['', ...context, text];
      return constrain(call);
    };
  }
  let answer = '';
  for await (const event of run(build)) {
    if (event.type === 'token') answer += event.text;
    if (event.type !== 'done' || !templated) {
      yield event;
      continue;
    }
    const text = prompt ?? (await applyTemplate(server, p, signal));
    const [asked, answered] = await Promise.all([
      tokenize(server, { content: text, addSpecial: false, parseSpecial: true, withPieces: false }, signal),
      tokenize(server, { content: answer, addSpecial: false, parseSpecial: false, withPieces: false }, signal),
    ]);
    yield { ...event, context: [...context, ...asked.tokens, ...answered.tokens] };
  }
}

/**
 * A generation with its own Go `template`: rendered and made raw when it is the simple kind, else
 * left to the model's chat template (as node-llama-cpp does with a template it cannot render).
 * For a model with no template at all (`untemplated`), the prompt as it is, as Ollama's default
 * template `{{ .Prompt }}` makes it.
 */
function withTemplate(p: GenerateParams, untemplated: boolean): GenerateParams {
  if (p.raw) return p;
  const { template, system, ...rest } = p;
  if (template === undefined || template === '') return untemplated ? { ...rest, raw: true } : { ...rest, ...(system !== undefined ? { system } : {}) };
  const rendered = renderGoTemplate(template, { ...(system !== undefined ? { System: system } : {}), Prompt: p.prompt });
  return rendered === null ? { ...rest, ...(system !== undefined ? { system } : {}) } : { ...rest, prompt: rendered, raw: true };
}

/** The prompt text the model's chat template makes of a generation's system and prompt (`/apply-template`). */
async function applyTemplate(server: LlamaServer, p: GenerateParams, signal: AbortSignal): Promise<string> {
  const messages = [...(p.system ? [{ role: 'system', content: p.system }] : []), { role: 'user', content: p.prompt }];
  const body = { messages, ...(p.think === false ? { chat_template_kwargs: { enable_thinking: false } } : {}) };
  const answer = (await server.fetchJson('POST', '/apply-template', body, signal)) as { prompt?: string };
  return answer.prompt ?? '';
}
