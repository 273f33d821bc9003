/**
 * The small helpers the `/v1/` routes share: aliasing and the 404 `param`.
 */
import t from 'tap';
import { Errors, isAppError, type AppError } from '../../core/index.js';
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
