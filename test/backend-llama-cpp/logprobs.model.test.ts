/**
 * Log probabilities on node-llama-cpp (the checks: test/api-openai/logprobs.ts): one entry per
 * generated token, structured answers included.
 */
import t from 'tap';
import { checkLogprobs } from '../api-openai/logprobs.js';
import { ON_LLAMA_CPP } from '../helpers/engines.js';

await checkLogprobs(t, ON_LLAMA_CPP, false);
