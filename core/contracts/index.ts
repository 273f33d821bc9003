/**
 * `lia/plugin/contracts`: the types of the contracts core's own hooks carry: the principal and
 * its admission, auth strategies, GPU probes, TLS credentials, what observers are told, and the
 * vocabulary of the service registry and log buffers. Types only; it follows the plugin API
 * version of `lia/plugin`. The contracts of the services the built-in plugins offer each other
 * (the engine and inference backends, the model store, the key store, the service manager, the
 * network, the GPU monitor) are in those plugins' public modules (`lia/engine`, ...).
 *
 * @module
 */
export type * from './auth.js';
export type * from './host.js';
export type * from './observe.js';
export type * from './tls.js';
export type { ServiceName, ServiceState } from '../services/registry.js';
