/**
 * The agents' turns check shared by both local engines (test/engine/agent-turns.model.test.ts on
 * node-llama-cpp, test/backend-llama-server/agent-turns.model.test.ts on llama-server): four
 * conversations at once that resend one long system prompt every turn and add a short message,
 * through `/v1/chat/completions` with the official `openai` client, on a real model with 4 slots.
 * What a client sees in `usage` (`prompt_tokens_details.cached_tokens`: the prompt tokens the
 * engine did not evaluate again) says per turn whether the history held in the model's cache was
 * used: the first turns evaluate the shared system prompt once between them, and every later turn
 * evaluates only what is new since the previous turn, also once a conversation has grown past nine
 * tenths of its context.
 *
 * @module
 */
import type { Test } from 'tap';
import { openaiFixture } from '../api-openai/openai-client.js';

export const MODEL = 'stories';
export const CONTEXT = 1024;
export const SESSIONS = 4;
const TURNS = 5;

/** About 590 tokens with this model's vocabulary: five turns end between nine tenths of the context and its end. */
const SYSTEM = `You are the helper of a small library. ${'Once upon a time there was a little girl who liked to play in the garden with her dog. '.repeat(17)}`;
const userMessage = (session: number, turn: number): string => `Session ${session}, turn ${turn}: the cat sat on the mat and looked at the bird in the tree.`;

interface Turn {
  prompt: number;
  cached: number;
  completion: number;
}

/** Runs the four conversations on an appliance started with `env` and checks every turn's usage. */
export async function checkAgentTurns(t: Test, env: Record<string, string> = {}): Promise<void> {
  const fx = await openaiFixture(
    t,
    { [MODEL]: 'gguf/stories260K-chatml.gguf' },
    { engine: { options: { numParallel: SESSIONS, contextLength: CONTEXT, keepAlive: -1 } } },
    env,
  );

  async function conversation(session: number): Promise<Turn[]> {
    const messages: { role: 'system' | 'user' | 'assistant'; content: string }[] = [{ role: 'system', content: SYSTEM }];
    const turns: Turn[] = [];
    for (let k = 1; k <= TURNS; k++) {
      messages.push({ role: 'user', content: userMessage(session, k) });
      const res = await fx.client.chat.completions.create({ model: MODEL, messages, max_tokens: 8, seed: session * 10 + k, temperature: 0.8 });
      const usage = res.usage!;
      const cached = usage.prompt_tokens_details?.cached_tokens;
      if (cached === undefined) throw new Error(`turn ${k} of session ${session}: usage has no prompt_tokens_details.cached_tokens`);
      turns.push({ prompt: usage.prompt_tokens, cached, completion: usage.completion_tokens });
      messages.push({ role: 'assistant', content: res.choices[0]!.message.content ?? '' });
    }
    return turns;
  }

  const sessions = await Promise.all(Array.from({ length: SESSIONS }, (_, s) => conversation(s)));
  const firsts = sessions.map((turns) => turns[0]!);
  const system = Math.min(...firsts.map((f) => f.prompt));
  t.ok(system > 500, `the system prompt is long (${system} tokens with the first message)`);
  const evaluatedWhole = firsts.filter((f) => f.prompt - f.cached > system / 2).length;
  t.equal(evaluatedWhole, 1, `one first turn evaluated the shared system prompt, the others copied it (cached: ${firsts.map((f) => f.cached).join(', ')})`);

  for (const [s, turns] of sessions.entries()) {
    for (let k = 1; k < TURNS; k++) {
      const turn = turns[k]!;
      const before = turns[k - 1]!;
      const fresh = turn.prompt - (before.prompt + before.completion);
      const evaluated = turn.prompt - turn.cached;
      // The answer is sent back as text and tokenized again, and the template adds a few tokens
      // around each message: a handful more than the new message, never the history.
      t.ok(
        evaluated >= 1 && evaluated <= fresh + 16,
        `session ${s}, turn ${k + 1}: evaluated ${evaluated} of ${turn.prompt} prompt tokens, ${fresh} of them new`,
      );
    }
  }
  const longest = Math.max(...sessions.map((turns) => turns.at(-1)!.prompt));
  t.ok(longest > CONTEXT * 0.9, `a conversation grew past nine tenths of the ${CONTEXT}-token context (${longest} tokens)`);
  await fx.conforms(t, SESSIONS * TURNS);
}
