/**
 * Log probabilities on llama-server (the checks: test/api-openai/logprobs.ts): the backend asks
 * for them over the OpenAI wire and carries the server's back on each token event. Its chat parser
 * trims white space at the ends of a structured answer, and those tokens' entries with it.
 */
import t from 'tap';
import { cachedBinary } from '../../plugins/backend-llama-server/build.js';
import { checkLogprobs } from '../api-openai/logprobs.js';

if (!(await cachedBinary())) {
  throw new Error('llama-server is not built: run `lia engine build` (or `node bin/lia.js engine build`; .ci/run does it once per run)');
}

await checkLogprobs(t, { LIA_BACKENDS: 'stories:latest=llama-server' }, true);
