#!/usr/bin/env node
// The `lia` command. The appliance runs from its TypeScript sources through tsx's loader, so
// there is no build step between a checkout and a running appliance.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../core/cli/main.ts');
process.exitCode = await main(process.argv.slice(2));
