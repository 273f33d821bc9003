/**
 * `lia/prompts`: the prompt text every local engine makes the same way, so a client reads the
 * same prompt and the same errors whichever engine runs its model. Nothing here imports a library:
 * an engine's own process (backend-llama-cpp's runner) loads it without the appliance's.
 *
 * @module
 */
export { promptTooLong } from './wire/context-length.js';
export { renderGoTemplate } from './wire/go-template.js';
