/**
 * Agents' turns on node-llama-cpp (the check: test/engine/agent-turns.ts): the runner copies the
 * shared system prompt between its sequences, and a conversation past nine tenths of its context
 * still evaluates only its new tokens (where the library would cut the prompt's beginning and
 * evaluate it all again).
 */
import t from 'tap';
import { checkAgentTurns } from './agent-turns.js';

t.test('four concurrent agents: the shared prefix is evaluated once, each later turn only its new tokens', (t) => checkAgentTurns(t));
