/** test/engine/thinking-qwen3.model.test.ts with GGUF models on llama-server: the engine matrix (test/helpers/engines.ts). */
import { onLlamaServer } from '../../helpers/engines.js';

await onLlamaServer(() => import('../../engine/thinking-qwen3.model.test.js'));
