/**
 * The TLS policy, kept in one object because `setSecureContext` rebuilds the context from exactly
 * the options it is given: every swap must spread this policy again, or the cipher list and the
 * minimum version silently fall back to Node's defaults.
 *
 * TLS 1.2 and 1.3 only; AEAD suites only (ECDSA certificates, so ECDSA suites suffice).
 *
 * @module
 */
import type { SecureContextOptions } from 'node:tls';

export const TLS_POLICY: Readonly<SecureContextOptions> = Object.freeze({
  minVersion: 'TLSv1.2',
  maxVersion: 'TLSv1.3',
  ciphers: [
    'TLS_AES_128_GCM_SHA256',
    'TLS_AES_256_GCM_SHA384',
    'TLS_CHACHA20_POLY1305_SHA256',
    'ECDHE-ECDSA-AES128-GCM-SHA256',
    'ECDHE-ECDSA-AES256-GCM-SHA384',
    'ECDHE-ECDSA-CHACHA20-POLY1305',
  ].join(':'),
  honorCipherOrder: true,
  ecdhCurve: 'X25519:P-256:P-384',
});
