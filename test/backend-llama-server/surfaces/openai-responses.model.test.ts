/** test/api-openai/responses.model.test.ts with GGUF models on llama-server: the engine matrix (test/helpers/engines.ts). */
import { onLlamaServer } from '../../helpers/engines.js';

await onLlamaServer(() => import('../../api-openai/responses.model.test.js'));
