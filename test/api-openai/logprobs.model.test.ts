/**
 * Log probabilities on node-llama-cpp, the default engine (the checks: test/api-openai/logprobs.ts).
 */
import t from 'tap';
import { checkLogprobs } from './logprobs.js';

await checkLogprobs(t);
