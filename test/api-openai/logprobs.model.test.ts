/**
 * Log probabilities on the machine's default GGUF engine (the checks: test/api-openai/logprobs.ts;
 * node-llama-cpp's: test/backend-llama-cpp/logprobs.model.test.ts). On llama-server the backend asks
 * for them over the OpenAI wire and carries the server's back on each token event; the token that
 * ends a structured answer is counted without an entry.
 */
import t from 'tap';
import { engineDifference } from '../helpers/engines.js';
import { checkLogprobs } from './logprobs.js';

await checkLogprobs(t, {}, engineDifference('Log probabilities of a structured answer', { 'llama-cpp': false, 'llama-server': true }));
