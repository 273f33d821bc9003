/**
 * `lia/host-services`: the public module of the `host-services` plugin: the service manager it
 * offers (`hooks.extensions.get('serviceManager')`) and what `/system/status` answers. Types only.
 * It follows the plugin API version of `lia/plugin`: within one major, only additions;
 * `etc/lia-host-services.api.md` records the surface.
 *
 * @module
 */
import type { ServiceManager } from './contracts.js';

export type * from './contracts.js';

declare module 'lia/plugin' {
  interface CustomHooks {
    /** Runs the services: the embedded supervisor or systemd (the `host-services` plugin). */
    serviceManager: ServiceManager;
  }
}
