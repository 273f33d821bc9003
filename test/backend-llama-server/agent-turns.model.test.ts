/**
 * Agents' turns on llama-server (the check: test/engine/agent-turns.ts): the backend places each
 * conversation's next turn in the slot that holds its history, and copies the shared system
 * prompt from the slot that evaluated it into the slots of the conversations that arrive meanwhile
 * (slots.ts), where llama-server alone would evaluate it once per slot.
 */
import t from 'tap';
import { cachedBinary } from '../../plugins/backend-llama-server/build.js';
import { checkAgentTurns, MODEL } from '../engine/agent-turns.js';

if (!(await cachedBinary())) {
  throw new Error('llama-server is not built: run `lia engine build` (or `node bin/lia.js engine build`; .ci/run does it once per run)');
}

t.test('four concurrent agents on llama-server: the shared prefix is evaluated once, each later turn only its new tokens', (t) =>
  checkAgentTurns(t, { LIA_BACKENDS: `${MODEL}:latest=llama-server` }),
);
