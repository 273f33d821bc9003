/**
 * The `console` plugin: `lia console`, the device console (see `command.ts`). It adds a command
 * and nothing to the server: the console is a client of the API the other plugins serve, so a
 * vendor who disables this plugin loses only the command.
 *
 * @module
 */
import { definePlugin } from 'lia/plugin';

export default definePlugin({
  name: 'console',
  apiVersion: 2,
  description: 'Device console: `lia console`, a full-screen text UI for the appliance screen',
  commands: async () => [(await import('./command.js')).consoleCommand],
  setup() {},
});
