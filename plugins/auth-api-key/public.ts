/**
 * `lia/auth-api-key`: the public module of the `auth-api-key` plugin: the key store it offers
 * (`hooks.extensions.get('keys')`). Types only. It follows the plugin API version of
 * `lia/plugin`: within one major, only additions; `etc/lia-auth-api-key.api.md` records it.
 *
 * @module
 */
import type { Principal } from 'lia/plugin/contracts';

/**
 * Key storage behind the master-key strategy. Only digests are kept; more keys (scoped,
 * revocable) can come later behind the same interface.
 */
export interface KeyStore {
  /** Checks a presented secret in constant time. */
  verify(secret: string): Principal | null;
  /** Replaces the master key; returns the new secret once. */
  rotateMaster(): Promise<{ key: string; hint: string }>;
  /** Where the master key lives on disk (shown in the boot banner). */
  readonly masterKeyPath: string;
}

declare module 'lia/plugin' {
  interface CustomHooks {
    /** The key store behind the master-key strategy (the `auth-api-key` plugin). */
    keys: KeyStore;
  }
}
