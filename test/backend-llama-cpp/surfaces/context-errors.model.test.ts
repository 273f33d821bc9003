/** test/engine/context-errors.model.test.ts with GGUF models on node-llama-cpp: the engine matrix (test/helpers/engines.ts). */
import { onLlamaCpp } from '../../helpers/engines.js';

await onLlamaCpp(() => import('../../engine/context-errors.model.test.js'));
