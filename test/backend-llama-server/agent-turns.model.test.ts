/**
 * Agents' turns on llama-server (the check: test/engine/agent-turns.ts): the backend places each
 * conversation's next turn in the slot that holds its history, and copies the shared system
 * prompt from the slot that evaluated it into the slots of the conversations that arrive meanwhile
 * (slots.ts), where llama-server alone would evaluate it once per slot.
 */
import t from 'tap';
import { checkAgentTurns, MODEL } from '../engine/agent-turns.js';
import { requireLlamaServer } from '../helpers/engines.js';

requireLlamaServer();

t.test('four concurrent agents on llama-server: the shared prefix is evaluated once, each later turn only its new tokens', (t) =>
  checkAgentTurns(t, { LIA_BACKENDS: `${MODEL}:latest=llama-server` }),
);
