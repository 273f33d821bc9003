/**
 * `lia/plugin/contracts`: the types of every contract the hooks carry: what inference backends
 * take and yield, what the model store, the engine, the key store, the CA, the network and the
 * service manager offer the other plugins, and what observers are told. Types only; it follows
 * the plugin API version of `lia/plugin`.
 *
 * @module
 */
export type * from './auth.js';
export type * from './backend.js';
export type * from './host.js';
export type * from './inference.js';
export type * from './model-store.js';
export type * from './network.js';
export type * from './observe.js';
export type * from './tls.js';
export type { ServiceName, ServiceState } from '../services/registry.js';
