/**
 * TLS credentials contract. The PKI plugin (`plugins/pki-local-ca`, service `svc-certs`) hands
 * core the leaf key and chain; core applies them to the HTTPS server together with the whole TLS
 * policy (`core/http/tls-policy.ts`), at start and on every renewal, without a restart.
 *
 * @module
 */

export interface TlsCredentials {
  /** PEM private key of the leaf. */
  key: string;
  /** PEM chain served to clients: the leaf first, then any intermediates (not the root). */
  cert: string;
}

export interface TlsProvider {
  /** The current credentials. */
  current(): TlsCredentials;
  /** Called with new credentials after a renewal or a re-issue. */
  onChange(listener: (credentials: TlsCredentials) => void): void;
  /** PEM of the root CA (what `/system/ca-cert` serves). */
  rootCertificatePem(): string;
  /** SHA-256 fingerprint of the root as `openssl x509 -noout -fingerprint -sha256` prints it. */
  rootFingerprint(): string;
  /** Re-checks the leaf against the current host name and addresses; re-issues when needed. */
  refresh(reason: string): Promise<boolean>;
  /**
   * The https URLs a client can verify for a server bound to `bindHost` on `port`: the names and
   * addresses the appliance answers on that the served certificate covers (the boot banner and
   * `GET /system/network` list them). Absent: none are advertised.
   */
  advertisedUrls?(bindHost: string, port: number): string[];
}
