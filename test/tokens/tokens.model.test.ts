/**
 * `POST /tokenize` and `/detokenize` (llama-server's shape) over real HTTPS on every kind of
 * local text model: a SentencePiece GGUF (stories260K), a WordPiece GGUF (the built reranker)
 * and ONNX folders (tiny-random-minilm, the built cross-encoder). Expected ids come from the
 * models' own vocabularies (vocab.txt, the GGUF token list from `/api/show`), not from the code
 * under test.
 */
import { readFile } from 'node:fs/promises';
import t from 'tap';
import { fixture } from '../helpers/fixtures.js';
import { post, rerankAppliance } from '../rerank/setup.js';

const app = await rerankAppliance();
t.teardown(() => app.close());

const bert = (await readFile(fixture('onnx/tiny-random-minilm/vocab.txt'), 'utf8')).split('\n');
const id = (token: string): number => {
  const i = bert.indexOf(token);
  if (i < 0) throw new Error(`${token} is not in vocab.txt`);
  return i;
};

t.test('WordPiece models (GGUF and ONNX) give the ids of vocab.txt', async (t) => {
  const words = ['hello', 'world', ',', 'token', '##ization', '!'];
  for (const model of ['reranker', 'cross', 'minilm']) {
    const plain = await post(app, '/tokenize', { model, content: 'Hello world, tokenization!' });
    t.equal(plain.status, 200, JSON.stringify(plain.json));
    t.same(plain.json, { tokens: words.map(id) }, `${model}: ids`);
    const special = await post(app, '/tokenize', { model, content: 'Hello world, tokenization!', add_special: true, with_pieces: true });
    t.same(
      special.json.tokens.map((p: { id: number }) => p.id),
      [id('[CLS]'), ...words.map(id), id('[SEP]')],
      `${model}: add_special puts [CLS] and [SEP] around`,
    );
    const pieces = special.json.tokens.map((p: { piece: string }) => p.piece.trim().replace(/^##/, ''));
    t.same(pieces, ['[CLS]', 'hello', 'world', ',', 'token', 'ization', '!', '[SEP]'], `${model}: pieces`);
    const back = await post(app, '/detokenize', { model, tokens: [id('hello'), id('world')] });
    t.equal(back.status, 200);
    t.equal(back.json.content.trim(), 'hello world', `${model}: detokenize`);
    const bad = await post(app, '/detokenize', { model, tokens: [bert.length + 5] });
    t.match([bad.status, bad.json.error], [400, /not a token of this model/], `${model}: an id past the vocabulary is a 400`);
  }
});

t.test('a SentencePiece GGUF: ids of its token list, BOS with add_special, special text parsed when asked', async (t) => {
  const show = await post(app, '/api/show', { model: 'stories', verbose: true });
  const info = show.json.model_info as Record<string, unknown>;
  const vocab = info['tokenizer.ggml.tokens'] as string[];
  const bos = info['tokenizer.ggml.bos_token_id'] as number;
  t.ok(vocab.length > 100, 'the verbose show lists the vocabulary');

  const content = 'Once upon a time, there was a cat.';
  const res = await post(app, '/tokenize', { model: 'stories', content, with_pieces: true });
  t.equal(res.status, 200);
  const tokens = res.json.tokens as Array<{ id: number; piece: string }>;
  t.ok(tokens.length > 5);
  for (const { id: tokenId, piece } of tokens) t.equal(piece, vocab[tokenId]!.replaceAll('\u2581', ' '), `piece of ${tokenId} is its vocabulary entry`);
  t.equal(tokens.map((p) => p.piece).join(''), ` ${content}`, 'the pieces spell the text (with the leading space SentencePiece adds)');
  t.not(tokens[0]!.id, bos, 'no BOS unless asked');

  const withBos = await post(app, '/tokenize', { model: 'stories', content, add_special: true });
  t.same(withBos.json.tokens, [bos, ...tokens.map((p) => p.id)], 'add_special: BOS first');
  const back = await post(app, '/detokenize', { model: 'stories', tokens: tokens.map((p) => p.id) });
  t.equal(back.json.content.trim(), content, 'detokenize gives the text back');

  const bosText = vocab[bos]!;
  const parsed = await post(app, '/tokenize', { model: 'stories', content: `${bosText}Once` });
  t.equal(parsed.json.tokens[0], bos, `parse_special (default true): "${bosText}" is the BOS token`);
  const literal = await post(app, '/tokenize', { model: 'stories', content: `${bosText}Once`, parse_special: false });
  t.notOk(literal.json.tokens.includes(bos), 'parse_special false: the same text is plain text');
  t.ok(literal.json.tokens.length > parsed.json.tokens.length);
});

t.test('bad requests, unknown models, keys and the allow-list', async (t) => {
  const cases: Array<[string, unknown, RegExp]> = [
    ['/tokenize', { model: 'stories' }, /content/],
    ['/tokenize', { content: 'x' }, /model/],
    ['/tokenize', { model: 'stories', content: 'x', with_pieces: 'yes' }, /with_pieces/],
    ['/detokenize', { model: 'stories', tokens: [-1] }, /tokens/],
    ['/detokenize', { model: 'stories', tokens: ['a'] }, /tokens/],
    ['/detokenize', { model: 'stories' }, /tokens/],
  ];
  for (const [route, body, field] of cases) {
    const res = await post(app, route, body);
    t.equal(res.status, 400, `${route} ${JSON.stringify(body)}`);
    t.match(res.json.error, field);
  }
  t.equal((await post(app, '/tokenize', { model: 'nope', content: 'x' })).status, 404);
  const empty = await post(app, '/tokenize', { model: 'stories', content: '' });
  t.same([empty.status, empty.json], [200, { tokens: [] }], 'an empty text has no tokens');

  const anon = await app.fetch('/tokenize', { method: 'POST', auth: false, body: JSON.stringify({ model: 'stories', content: 'x' }) });
  t.equal(anon.status, 401);
  const key = await post(app, '/system/api-keys', { name: 'tok', scopes: ['inference'], models: ['stories'] });
  t.equal(key.status, 201);
  const auth = { authorization: `Bearer ${key.json.key as string}` };
  t.equal((await post(app, '/tokenize', { model: 'stories', content: 'x' }, auth)).status, 200, 'its model');
  const other = await post(app, '/detokenize', { model: 'minilm', tokens: [1] }, auth);
  t.match([other.status, other.json.error], [403, /may not use the model "minilm"/], 'another model: 403');
});
