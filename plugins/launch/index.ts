/**
 * The `launch` plugin: `lia launch <client>` starts a coding agent (Claude Code, Codex CLI,
 * opencode, Qwen Code) pointed at the appliance, over HTTPS with a named key of its own and the
 * appliance's CA trusted, as `ollama launch` does for Ollama. A command only: nothing is added to
 * the server, and a vendor who disables the plugin loses only the command. See docs/agents.md.
 *
 * @module
 */
import { definePlugin } from 'lia/plugin';

export default definePlugin({
  name: 'launch',
  apiVersion: 2,
  description: 'Coding agents: `lia launch claude|codex|opencode|qwen` runs one against the appliance',
  commands: async () => [(await import('./command.js')).launchCommand],
  setup() {},
});
