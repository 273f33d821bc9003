/**
 * Log probabilities on llama-server (the checks: test/api-openai/logprobs.ts): the backend asks
 * for them over the OpenAI wire and carries the server's back on each token event. The token that
 * ends a structured answer is counted without an entry.
 */
import t from 'tap';
import { cachedBinary } from '../../plugins/backend-llama-server/build.js';
import { checkLogprobs } from '../api-openai/logprobs.js';

if (!(await cachedBinary())) {
  throw new Error('llama-server is not built: run `lia engine build` (or `node bin/lia.js engine build`; .ci/run does it once per run)');
}

await checkLogprobs(t, { LIA_BACKENDS: 'stories:latest=llama-server' }, true);
