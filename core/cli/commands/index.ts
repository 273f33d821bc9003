/**
 * Core's own commands; every other command comes from a plugin.
 *
 * @module
 */
import type { CliCommand } from '../types.js';
import { pluginsCommand } from './plugins.js';
import { commands as serve } from './serve.js';

export const commands: readonly CliCommand[] = [...serve, pluginsCommand];
