/**
 * `lia/prompts`: the prompt text every local engine makes the same way, so a client reads the
 * same prompt, the same errors and vectors of the same shape whichever engine runs its model. Nothing here imports a library:
 * an engine's own process (backend-llama-cpp's runner) loads it without the appliance's.
 *
 * @module
 */
export { promptTooLong } from './wire/context-length.js';
export { renderGoTemplate } from './wire/go-template.js';
export { familyJinjaTemplate, goTemplateFamily, type TemplateFamily } from './wire/chat-families.js';
export { shapeEmbedding } from './wire/embedding-shape.js';
