/** test/api-anthropic/messages.model.test.ts with GGUF models on node-llama-cpp: the engine matrix (test/helpers/engines.ts). */
import { onLlamaCpp } from '../../helpers/engines.js';

await onLlamaCpp(() => import('../../api-anthropic/messages.model.test.js'));
