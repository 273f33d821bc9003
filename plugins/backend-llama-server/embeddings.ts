/**
 * Embeddings on llama-server, answered as node-llama-cpp's runner answers them, whichever engine
 * serves the model: each input is counted by the server's tokenizer (`/tokenize`, BOS included)
 * and, when longer than a slot's context, cut (`truncate`, Ollama's default) or refused with
 * Ollama's 400; the inputs are embedded by the native `/embeddings` (unnormalised), and each
 * vector is cut to `dimensions` and L2-normalised unless the legacy route asks for it raw. The
 * same text gives the same vector up to float rounding (about 1e-7): llama-server evaluates a
 * prompt its slot already holds, or several at once, in batches of another shape.
 *
 * @module
 */
import { Errors } from 'lia/plugin';
import type { EmbedParams, EmbedResult } from 'lia/engine';
import { shapeEmbedding } from 'lia/gguf';
import { tokenize } from './ranking.js';
import type { LlamaServer } from './server.js';

/** The vectors of `p.inputs` from an embedding server (`--embeddings`). */
export async function embedOn(server: LlamaServer, p: EmbedParams, signal: AbortSignal): Promise<EmbedResult> {
  const inputs: number[][] = [];
  for (const input of p.inputs) {
    let { tokens } = await tokenize(server, { content: input, addSpecial: true, parseSpecial: false, withPieces: false }, signal);
    // The server evaluates fewer tokens than its context holds.
    const limit = server.contextPerSlot - 1;
    if (tokens.length > limit) {
      if (!p.truncate) throw Errors.badRequest('the input length exceeds the context length');
      tokens = tokens.slice(0, limit);
    }
    // An empty input of a model without BOS: one token, as node-llama-cpp embeds it.
    inputs.push(tokens.length > 0 ? tokens : [0]);
  }
  if (inputs.length === 0) return { embeddings: [], promptTokens: 0 };
  const answer = (await server.fetchJson('POST', '/embeddings', { content: inputs, embd_normalize: -1 }, signal)) as Array<{
    index?: number;
    embedding?: number[][];
  }>;
  const embeddings = inputs.map((_, i) => {
    const vector = answer.find((a) => a.index === i)?.embedding?.[0];
    if (!Array.isArray(vector)) throw Errors.badGateway('the engine sent no embedding');
    return shapeEmbedding(vector, p.dimensions, p.normalize ?? true);
  });
  return { embeddings, promptTokens: inputs.reduce((n, t) => n + t.length, 0) };
}
