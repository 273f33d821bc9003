/**
 * The network provider contract: host name, interfaces and mDNS (`plugins/host-network`).
 *
 * @module
 */

export interface InterfaceAddress {
  address: string;
  family: 'IPv4' | 'IPv6';
  /** Prefix length, e.g. 24. */
  prefix: number;
  internal: boolean;
}

export interface NetworkInterfaceInfo {
  name: string;
  mac: string | null;
  addresses: InterfaceAddress[];
}

export interface MdnsState {
  enabled: boolean;
  /** How mDNS is served: `avahi`, `embedded` or `none`. */
  responder: string;
  /** The `.local` name actually in use (avahi may add `-2` on a conflict). */
  hostname: string | null;
  /** `probing`, `announced`, `stopped` or `error` (with `error` set). Defaults to absent for providers that do not track it. */
  state?: string;
  /** Why mDNS is not working, when `state` is `error`. */
  error?: string | null;
  services: { type: string; name: string; port: number }[];
}

export interface NetworkProvider {
  /** The host name the appliance presents (used for the banner and the certificate). */
  hostname(): string;
  interfaces(): NetworkInterfaceInfo[];
  mdns(): MdnsState;
  /** Applies a new host name (already validated); resolves once it is in effect. */
  setHostname(name: string): Promise<void>;
  /** Listeners run after the host name or the address set changed. */
  onChange(listener: (reason: string) => void): void;
}
