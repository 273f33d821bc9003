/**
 * Log probabilities from the sampler, on every surface that has them: `/v1/chat/completions`
 * (the `openai` client, schema-checked), the legacy `/v1/completions` object, and Ollama's
 * `logprobs`/`top_logprobs` on `/api/chat` and `/api/generate`. At temperature 0 the sampler is
 * greedy, so each chosen token is the first of its alternatives. Run on each local engine
 * (test/api-openai/logprobs.model.test.ts, test/backend-llama-server/logprobs.model.test.ts).
 *
 * @module
 */
import type { Test } from 'tap';
import { ndjson } from '../engine/helpers.js';
import { openaiFixture } from './openai-client.js';

const MODEL = 'stories';
const ask = [{ role: 'user' as const, content: 'Tell me a story about a cat.' }];

interface Entry {
  token: string;
  logprob: number;
  bytes?: number[] | null;
  top_logprobs?: { token: string; logprob: number; bytes?: number[] | null }[];
}

/** Each entry is a probability's log, its alternatives are sorted and (greedy) start with the chosen token. */
function checkEntries(t: Test, entries: Entry[], top: number): void {
  for (const e of entries) {
    t.ok(e.logprob <= 0 && Number.isFinite(e.logprob), `logprob ${e.logprob} of ${JSON.stringify(e.token)}`);
    t.same(e.bytes, [...Buffer.from(e.token, 'utf8')]);
    const alts = e.top_logprobs ?? [];
    t.equal(alts.length, top, `${top} alternatives`);
    for (let i = 1; i < alts.length; i++) t.ok(alts[i - 1]!.logprob >= alts[i]!.logprob, 'alternatives sorted, most likely first');
    if (top > 0) {
      t.equal(alts[0]!.token, e.token, 'greedy: the chosen token is the most likely');
      t.equal(alts[0]!.logprob, e.logprob);
      t.ok(alts.reduce((sum, a) => sum + Math.exp(a.logprob), 0) <= 1 + 1e-6, 'the probabilities sum to at most 1');
    }
  }
  if (top > 1)
    t.ok(
      entries.some((e) => e.top_logprobs![1]!.logprob < 0 && e.logprob < 0),
      'a real distribution, not one certain token',
    );
}

/**
 * The checks, on an appliance started with `env` (`LIA_*` settings: the engine a model runs on).
 * `trimmed`: the engine counts the token that ends a structured answer without giving it an entry
 * (llama-server), so there the entries may be fewer than those generated and are compared with
 * the answer up to white space at its ends.
 */
export async function checkLogprobs(t: Test, env: Record<string, string> = {}, trimmed = false): Promise<void> {
  const fx = await openaiFixture(t, { [MODEL]: 'gguf/stories260K-chatml.gguf' }, {}, env);
  const { client, app } = fx;

  t.test('chat completions: logprobs and top_logprobs, collected and streamed', async (t) => {
    const res = await client.chat.completions.create({ model: MODEL, messages: ask, max_tokens: 6, temperature: 0, logprobs: true, top_logprobs: 3 });
    const content = res.choices[0]!.logprobs!.content!;
    t.equal(res.choices[0]!.finish_reason, 'length');
    t.equal(content.length, res.usage!.completion_tokens, 'one entry per generated token');
    checkEntries(t, content, 3);

    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: ask,
      max_tokens: 6,
      temperature: 0,
      logprobs: true,
      top_logprobs: 3,
      stream: true,
    });
    const streamed: Entry[] = [];
    let text = '';
    for await (const chunk of stream) {
      const c = chunk.choices[0];
      if (c?.delta.content) text += c.delta.content;
      streamed.push(...(c?.logprobs?.content ?? []));
    }
    t.equal(text, res.choices[0]!.message.content, 'the same greedy text');
    t.same(
      streamed.map((e) => e.token),
      content.map((e) => e.token),
      'the same tokens, spread over the chunks',
    );

    const plain = await client.chat.completions.create({ model: MODEL, messages: ask, max_tokens: 2 });
    t.equal(plain.choices[0]!.logprobs, null, 'none unless asked for');
    await fx.conforms(t, 4);

    const bad = await app.fetch('/v1/chat/completions', { method: 'POST', body: JSON.stringify({ model: MODEL, messages: ask, top_logprobs: 2 }) });
    t.equal(bad.status, 400);
    t.match(await bad.json(), { error: { param: 'top_logprobs' } });
  });

  t.test('legacy completions: the logprobs object', async (t) => {
    const res = await app.fetch('/v1/completions', {
      method: 'POST',
      body: JSON.stringify({ model: MODEL, prompt: 'Once upon a time', max_tokens: 5, temperature: 0, logprobs: 2 }),
    });
    t.equal(res.status, 200);
    const body = (await res.json()) as {
      choices: { text: string; logprobs: { tokens: string[]; token_logprobs: number[]; top_logprobs: Record<string, number>[]; text_offset: number[] } }[];
      usage: { completion_tokens: number };
    };
    const lp = body.choices[0]!.logprobs;
    t.equal(lp.tokens.length, body.usage.completion_tokens);
    t.equal(lp.token_logprobs.length, lp.tokens.length);
    t.equal(lp.text_offset[0], 0);
    lp.tokens.forEach((tok, i) => {
      t.ok(lp.token_logprobs[i]! <= 0);
      t.equal(Object.keys(lp.top_logprobs[i]!).length <= 2, true);
      t.equal(lp.top_logprobs[i]![tok], lp.token_logprobs[i], 'greedy: the chosen token is among the top');
    });
  });

  t.test('Ollama: logprobs on /api/chat (streamed) and /api/generate', async (t) => {
    const res = await app.fetch('/api/chat', {
      method: 'POST',
      body: JSON.stringify({ model: MODEL, messages: ask, logprobs: true, top_logprobs: 2, options: { num_predict: 6, temperature: 0 } }),
    });
    const lines = (await ndjson(res)) as { logprobs?: Entry[]; eval_count?: number; done: boolean }[];
    const entries = lines.flatMap((l) => l.logprobs ?? []);
    t.equal(entries.length, lines.at(-1)!.eval_count);
    checkEntries(t, entries, 2);

    const gen = await app.fetch('/api/generate', {
      method: 'POST',
      body: JSON.stringify({ model: MODEL, prompt: 'Once upon a time', raw: true, stream: false, logprobs: true, options: { num_predict: 4, temperature: 0 } }),
    });
    const one = (await gen.json()) as { response: string; logprobs: Entry[]; eval_count: number };
    t.equal(one.logprobs.length, one.eval_count);
    t.notOk('top_logprobs' in one.logprobs[0]!, 'no alternatives unless top_logprobs asks');
    t.ok(one.logprobs.every((e) => e.logprob <= 0));

    // The grammar of `format` holds on this path too, and limits the alternatives to what it allows
    // (llama.cpp's grammar allows up to 22 characters of white space between JSON tokens, hence the room).
    const schema = { type: 'object', properties: { mood: { type: 'string', enum: ['happy', 'sad'] } }, required: ['mood'], additionalProperties: false };
    const json = await app.fetch('/api/chat', {
      method: 'POST',
      body: JSON.stringify({
        model: MODEL,
        messages: ask,
        stream: false,
        format: schema,
        logprobs: true,
        top_logprobs: 2,
        options: { num_predict: 80, temperature: 0 },
      }),
    });
    const structured = (await json.json()) as { message: { content: string }; logprobs: Entry[]; eval_count: number; done_reason: string };
    t.equal(structured.done_reason, 'stop', 'the grammar ended the answer');
    t.match(JSON.parse(structured.message.content), { mood: /^(happy|sad)$/ });
    const spelled = structured.logprobs.map((e) => e.token).join('');
    if (trimmed) {
      t.ok(structured.logprobs.length <= structured.eval_count, 'at most one entry per generated token');
      t.equal(spelled.trim(), structured.message.content.trim(), 'the tokens spell the answer, up to white space at its ends');
    } else {
      t.equal(structured.logprobs.length, structured.eval_count);
      t.equal(spelled, structured.message.content, 'the tokens spell the answer');
    }

    const bad = await app.fetch('/api/chat', { method: 'POST', body: JSON.stringify({ model: MODEL, messages: ask, logprobs: true, top_logprobs: 21 }) });
    t.equal(bad.status, 400);
    t.match(await bad.json(), { error: 'top_logprobs must be between 0 and 20' });
  });
}
