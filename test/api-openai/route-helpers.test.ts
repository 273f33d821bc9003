/**
 * The small helpers the `/v1/` routes share: aliasing, the 404 `param`, and priming a stream so
 * that an error before the first event is thrown (and keeps its status) instead of streamed.
 */
import t from 'tap';
import { Errors, isAppError, primed, type AppError } from '../../core/index.js';
import type { GenerationEvent } from '../../core/contracts/index.js';
import { openaiErrorBody } from '../../plugins/api-openai/errors.js';
import { resolveAlias, withModelParam } from '../../plugins/api-openai/routes/common.js';

t.test('aliases', async (t) => {
  const options = { aliases: { 'gpt-4o-mini': 'qwen:7b' } };
  t.equal(resolveAlias('gpt-4o-mini', options), 'qwen:7b');
  t.equal(resolveAlias('stories', options), 'stories');
  t.equal(resolveAlias('toString', options), 'toString', 'no prototype keys');
});

t.test('an unknown model is a 404 with param model; other errors pass through', async (t) => {
  const caught = (err: unknown) => {
    try {
      withModelParam(err, 'x');
    } catch (e) {
      return e;
    }
    return undefined;
  };
  const e = caught(Errors.modelNotFound("model 'x' not found"));
  t.ok(isAppError(e));
  t.match(e, { statusCode: 404, param: 'model', message: "model 'x' not found" });
  t.match(openaiErrorBody(e as AppError), { error: { type: 'invalid_request_error', param: 'model', code: 'model_not_found' } });
  const other = Errors.unavailable('queue full');
  t.equal(caught(other), other);
  const plain = new Error('boom');
  t.equal(caught(plain), plain);
});

t.test('primed', async (t) => {
  let closed = 0;
  async function* ok(): AsyncGenerator<GenerationEvent> {
    try {
      yield { type: 'token', text: 'a' };
      yield { type: 'token', text: 'b' };
    } finally {
      closed++;
    }
  }
  const events: GenerationEvent[] = [];
  for await (const e of await primed(ok())) events.push(e);
  t.same(
    events,
    [
      { type: 'token', text: 'a' },
      { type: 'token', text: 'b' },
    ],
    'the first event is kept',
  );
  t.equal(closed, 1);

  async function* failsFirst(): AsyncGenerator<GenerationEvent> {
    yield* []; // no event: the generation fails at its first step
    throw Errors.badRequest('bad schema');
  }
  await t.rejects(primed(failsFirst()), { statusCode: 400, message: 'bad schema' }, 'a failure before the first event is thrown');

  const early = await primed(ok());
  for await (const _ of early) break;
  t.equal(closed, 2, 'breaking out closes the source (cancels the generation)');

  let started = false;
  async function* engine(): AsyncGenerator<GenerationEvent> {
    started = true; // where the runner client sends the request
    yield { type: 'token', text: 'a' };
  }
  const pending = primed(engine());
  t.equal(started, true, 'the source starts before primed() returns, so a route can set up meanwhile');
  await pending;
});
