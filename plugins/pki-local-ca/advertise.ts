/**
 * The https URLs the appliance advertises (the boot banner, `GET /system/network`, the device
 * console): `localhost` when it is served, the `.local` name mDNS announces, then each listening
 * address, each only when the served certificate covers it. A name the certificate leaves out
 * would make every client fail with an unknown-name error (curl exit 60). The TLS provider
 * answers `advertisedUrls` with this list; the `urls` banner section prints it.
 * The bare host name is never listed: a certificate cannot carry a single-label name (see
 * docs/security.md).
 *
 * @module
 */
import os from 'node:os';

/** Addresses the server answers on for a bind host. */
export function listenAddresses(host: string, interfaces = os.networkInterfaces()): string[] {
  const all = Object.values(interfaces).flatMap((list) => list ?? []);
  if (host === '0.0.0.0') return all.filter((a) => a.family === 'IPv4').map((a) => a.address);
  if (host === '::') return all.filter((a) => !a.address.startsWith('fe80')).map((a) => a.address);
  return [host];
}

/** An https URL for a host name or address (IPv6 in brackets). */
export function httpsUrl(host: string, port: number): string {
  return `https://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

export interface AdvertiseInput {
  /** The configured bind host (`host`). */
  bindHost: string;
  port: number;
  /** The appliance's host name, with or without `.local`. */
  hostname: string;
  /** The `.local` name mDNS actually announces (it may carry `-2` after a conflict), if any. */
  mdnsHostname?: string | null;
  /** Whether the served certificate covers a name or address; names it leaves out are not advertised. */
  covers: (host: string) => boolean;
  interfaces?: ReturnType<typeof os.networkInterfaces>;
}

/** The URLs to advertise, in the order above, without duplicates. */
export function advertisedUrls(input: AdvertiseInput): string[] {
  const { bindHost, port } = input;
  const wildcard = bindHost === '0.0.0.0' || bindHost === '::';
  const hosts: string[] = [];
  if (wildcard || bindHost === 'localhost' || bindHost.startsWith('127.')) hosts.push('localhost');
  if (wildcard) hosts.push(input.mdnsHostname || `${input.hostname.replace(/\.local$/i, '')}.local`);
  hosts.push(...listenAddresses(bindHost, input.interfaces));
  const urls = new Set<string>();
  for (const h of hosts) if (input.covers(h)) urls.add(httpsUrl(h, port));
  return [...urls];
}
