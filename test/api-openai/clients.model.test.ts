/**
 * The Responses API as two popular client libraries use it, against a real appliance:
 * the AI SDK (`ai` with `@ai-sdk/openai`, whose default provider calls `/v1/responses`) and
 * LangChain's `ChatOpenAI` with `useResponsesApi`. Both go through the schema-checking fetch of
 * openai-client.ts, so every body and event they receive is also checked against OpenAI's
 * schemas. The tiny fixture model cannot choose a tool by itself, so the tool call is forced.
 */
import t, { type Test } from 'tap';
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, jsonSchema, streamText, tool } from 'ai';
import { ChatOpenAI } from '@langchain/openai';
import { schemaCheckedFetch } from '../helpers/openai-schema.js';
import { openaiFixture } from './openai-client.js';

const MODEL = 'stories';
const fx = await openaiFixture(t, { [MODEL]: 'gguf/stories260K-chatml.gguf' });
const { app } = fx;
const checked = schemaCheckedFetch(app.dispatcher());
const fetchWithCa = checked.fetch as unknown as typeof globalThis.fetch;
const ask = 'Tell me a story about a cat.';

async function conforms(t: Test, min: number): Promise<void> {
  const { failures, checked: n } = await checked.drain();
  t.same(failures, [], 'every body and event conforms to the OpenAI schemas');
  t.ok(n >= min, `${n} payloads validated`);
}

t.test('AI SDK: generateText, streamText and a tool call over /v1/responses', async (t) => {
  const provider = createOpenAI({ baseURL: `${app.url}/v1`, apiKey: app.key, fetch: fetchWithCa });
  const model = provider(MODEL);

  const text = await generateText({ model, prompt: ask, maxOutputTokens: 8, temperature: 0, maxRetries: 0 });
  t.ok(text.text.length > 0, `text: ${JSON.stringify(text.text)}`);
  t.equal(text.finishReason, 'length');
  t.equal(text.usage.outputTokens, 8);
  t.ok((text.usage.inputTokens ?? 0) > 0);
  t.match(text.response.id, /^resp_/, 'the Responses API answered');

  const stream = streamText({ model, prompt: ask, maxOutputTokens: 8, temperature: 0, maxRetries: 0 });
  let streamed = '';
  for await (const delta of stream.textStream) streamed += delta;
  t.equal(streamed, text.text, 'the same greedy text, streamed');
  t.equal(await stream.finishReason, 'length');

  const weather = tool({
    description: 'Weather of a city',
    inputSchema: jsonSchema<{ city: string }>({ type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false }),
  });
  const called = await generateText({
    model,
    prompt: 'What is the weather in Paris?',
    tools: { get_weather: weather },
    toolChoice: { type: 'tool', toolName: 'get_weather' },
    maxOutputTokens: 200,
    temperature: 0,
    maxRetries: 0,
  });
  t.equal(called.toolCalls.length, 1);
  t.equal(called.toolCalls[0]!.toolName, 'get_weather');
  t.type((called.toolCalls[0]!.input as { city: unknown }).city, 'string', 'the arguments follow the schema');
  t.equal(called.finishReason, 'tool-calls');
  await conforms(t, 3);
});

t.test('LangChain ChatOpenAI with useResponsesApi: invoke and stream', async (t) => {
  const chat = new ChatOpenAI({
    model: MODEL,
    apiKey: app.key,
    useResponsesApi: true,
    temperature: 0,
    maxTokens: 8,
    maxRetries: 0,
    configuration: { baseURL: `${app.url}/v1`, fetch: fetchWithCa },
  });
  const answer = await chat.invoke(ask);
  t.ok(answer.text.length > 0, `text: ${JSON.stringify(answer.text)}`);
  t.match(answer.id ?? answer.response_metadata.id, /^(resp_|msg_)/);
  t.equal(answer.usage_metadata?.output_tokens, 8);

  let streamed = '';
  for await (const chunk of await chat.stream(ask)) streamed += chunk.text;
  t.equal(streamed, answer.text, 'the same greedy text, streamed');
  await conforms(t, 2);
});
