/**
 * `lia/host-network`: the public module of the `host-network` plugin: the network provider it
 * offers (`hooks.extensions.get('network')`: host name, interfaces, mDNS); a replacement declares
 * `provides: ['network']` and disables the built-in one. Types only. It follows the plugin API
 * version of `lia/plugin`: within one major, only additions; `etc/lia-host-network.api.md`
 * records the surface.
 *
 * @module
 */
import type { NetworkProvider } from './contracts.js';

export type * from './contracts.js';

declare module 'lia/plugin' {
  interface CustomHooks {
    /** Host name, interfaces and mDNS (the `host-network` plugin). */
    network: NetworkProvider;
  }
}
