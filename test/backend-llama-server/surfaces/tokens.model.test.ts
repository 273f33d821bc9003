/** test/tokens/tokens.model.test.ts with GGUF models on llama-server: the engine matrix (test/helpers/engines.ts). */
import { onLlamaServer } from '../../helpers/engines.js';

await onLlamaServer(() => import('../../tokens/tokens.model.test.js'));
