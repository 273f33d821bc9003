/**
 * Plugin selections for tests that exercise one area without loading the others.
 *
 * @module
 */
import type { PluginEntry } from '../../core/config/schema.js';
import { FAKE_BACKEND } from '../../core/testing/index.js';

/** Only the runtime: PKI, API key, web UI. Everything else disabled. */
export const RUNTIME_ONLY: Record<string, PluginEntry> = {
  'host-network': false,
  'host-gpu': false,
  'host-services': false,
  'model-store': false,
  gguf: false,
  'backend-llama-cpp': false,
  'backend-llama-server': false,
  'backend-transformers': false,
  engine: false,
  'api-openai': false,
  'api-anthropic': false,
};

/** The runtime and the host plugins, no models; mDNS off so tests do not multicast. */
export const HOST_ONLY: Record<string, PluginEntry> = {
  'model-store': false,
  gguf: false,
  'backend-llama-cpp': false,
  'backend-llama-server': false,
  'backend-transformers': false,
  engine: false,
  'api-openai': false,
  'api-anthropic': false,
  'host-network': { options: { mdns: 'off' } },
};

/** Only what inference needs: PKI, keys, the store, the llama.cpp backend and the engine. */
export const ENGINE_ONLY: Record<string, PluginEntry> = {
  'host-network': false,
  'host-gpu': false,
  'host-services': false,
  'backend-transformers': false,
  'api-openai': false,
  webui: false,
};

/**
 * The fake backend (`lia/testing`'s, with `options`) in place of the model backends, mDNS off:
 * the appliance of a test that needs answers but no model file.
 */
export function fakeBackendOnly(options?: Record<string, unknown>): Record<string, PluginEntry> {
  return {
    'host-network': { options: { mdns: 'off' } },
    'backend-llama-cpp': false,
    'backend-transformers': false,
    'fake-backend': options ? { ...FAKE_BACKEND, options } : FAKE_BACKEND,
  };
}
