/** test/engine/generate.model.test.ts with GGUF models on llama-server: the engine matrix (test/helpers/engines.ts). */
import { onLlamaServer } from '../../helpers/engines.js';

await onLlamaServer(() => import('../../engine/generate.model.test.js'));
