/**
 * Real rerank clients pointed at the appliance over HTTPS with its CA: the official `cohere-ai`
 * npm client (v1 `CohereClient.rerank` → `/v1/rerank`, v2 `CohereClientV2.rerank` →
 * `/v2/rerank`), and LangChain's `CohereRerank` document compressor (`@langchain/cohere`) given
 * that client, as a RAG pipeline uses it, on the GGUF reranker and the ONNX cross-encoder.
 */
import { CohereRerank } from '@langchain/cohere';
import { Document } from '@langchain/core/documents';
import { CohereClient, CohereClientV2, CohereError } from 'cohere-ai';
import t from 'tap';
import { fetch as undiciFetch } from 'undici';
import { post, rerankAppliance } from './setup.js';

const app = await rerankAppliance();
t.teardown(() => app.close());

/** `fetch` trusting the appliance's CA (the client's `fetch` option). */
const trusted = ((input: string | URL | Request, init?: RequestInit) =>
  undiciFetch(input as string, { ...(init as object), dispatcher: app.dispatcher() })) as unknown as typeof fetch;
const options = { token: app.key, environment: app.url, fetch: trusted };

const QUERY = 'what do cats eat';
const DOCS = ['Cats are carnivores and eat meat.', 'The stock market fell sharply on Monday.', 'what do cats eat', 'Paris is the capital of France.'];

for (const model of ['reranker', 'cross']) {
  t.test(`cohere-ai v1 and v2 on ${model}`, async (t) => {
    const direct = await post(app, '/v1/rerank', { model, query: QUERY, documents: DOCS });
    t.equal(direct.status, 200);
    const best = direct.json.results as Array<{ index: number; relevance_score: number }>;

    const v1 = await new CohereClient(options).rerank({ model, query: QUERY, documents: DOCS, topN: 3, returnDocuments: true });
    t.same(
      v1.results.map((r) => [r.index, r.relevanceScore, r.document?.text]),
      best.slice(0, 3).map((r) => [r.index, r.relevance_score, DOCS[r.index]]),
      'v1: the top three, their scores and documents',
    );
    const v2 = await new CohereClientV2(options).rerank({ model, query: QUERY, documents: DOCS, topN: 2 });
    t.same(
      v2.results.map((r) => [r.index, r.relevanceScore]),
      best.slice(0, 2).map((r) => [r.index, r.relevance_score]),
      'v2: the top two',
    );
  });
}

t.test('cohere-ai sees a model that cannot rank as a 400, and a wrong key as a 401', async (t) => {
  const err = await new CohereClient(options).rerank({ model: 'stories', query: QUERY, documents: DOCS }).catch((e: unknown) => e);
  t.ok(err instanceof CohereError, 'a CohereError');
  t.equal((err as CohereError).statusCode, 400);
  t.match(JSON.stringify((err as CohereError).body), /does not support rerank/);
  const denied = await new CohereClient({ ...options, token: 'lia_wrong' }).rerank({ model: 'cross', query: QUERY, documents: DOCS }).catch((e: unknown) => e);
  t.equal((denied as CohereError).statusCode, 401);
});

t.test("LangChain's CohereRerank compresses documents with the appliance's reranker", async (t) => {
  const rerank = new CohereRerank({ client: new CohereClient(options), model: 'reranker', topN: 2 });
  const docs = DOCS.map((pageContent, i) => new Document({ pageContent, metadata: { i } }));
  const kept = await rerank.compressDocuments(docs, QUERY);
  const direct = await post(app, '/v1/rerank', { model: 'reranker', query: QUERY, documents: DOCS, top_n: 2 });
  t.same(
    kept.map((d) => [d.metadata['i'], d.metadata['relevanceScore']]),
    direct.json.results.map((r: { index: number; relevance_score: number }) => [r.index, r.relevance_score]),
    'the two best documents, in order, with their scores',
  );
  const ranked = await rerank.rerank(DOCS, QUERY, { model: 'cross', topN: 4 });
  t.equal(ranked.length, 4);
  t.ok(
    ranked.every((r, i) => i === 0 || ranked[i - 1]!.relevanceScore >= r.relevanceScore),
    'sorted by relevance',
  );
});
