/**
 * The console banner printed at boot, like the one a device shows on its screen: host name and
 * every URL the appliance answers on, then the sections plugins add through `hooks.banner` (the
 * CA fingerprint to compare with the downloaded certificate, where the master key is kept, ...).
 *
 * Only URLs a client can verify are advertised: a name or address the served certificate leaves
 * out would make every client fail with an unknown-name error (curl exit 60), so
 * {@link advertisedUrls} drops it. The device console (`lia console`) shows the same list, read
 * from `GET /system/network`.
 *
 * @module
 */
import { X509Certificate } from 'node:crypto';
import os from 'node:os';
import type { Config } from './config/schema.js';
import type { BuiltApp } from './http/app.js';

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

/** True when the certificate covers the name or IP address (no certificate: nothing is covered). */
export function certificateCovers(certPem: string | undefined, host: string): boolean {
  if (!certPem) return false;
  try {
    const cert = new X509Certificate(certPem);
    return /^[\d.]+$/.test(host) || host.includes(':') ? cert.checkIP(host) !== undefined : cert.checkHost(host) !== undefined;
  } catch {
    return false;
  }
}

export interface AdvertiseInput {
  /** The configured bind host (`host`). */
  bindHost: string;
  port: number;
  /** The appliance's host name, with or without `.local`. */
  hostname: string;
  /** The `.local` name mDNS actually announces (it may carry `-2` after a conflict), if any. */
  mdnsHostname?: string | null;
  /** PEM of the served leaf; names it leaves out are not advertised. */
  certPem: string | undefined;
  interfaces?: ReturnType<typeof os.networkInterfaces>;
}

/**
 * The https URLs to advertise, in order: `localhost` (when it is served), the `.local` name mDNS
 * announces (else `<hostname>.local`), then each listening address; each only when the served
 * certificate covers it. The bare host name is never listed: a certificate cannot carry a
 * single-label name (see docs/security.md).
 */
export function advertisedUrls(input: AdvertiseInput): string[] {
  const { bindHost, port } = input;
  const wildcard = bindHost === '0.0.0.0' || bindHost === '::';
  const hosts: string[] = [];
  if (wildcard || bindHost === 'localhost' || bindHost.startsWith('127.')) hosts.push('localhost');
  if (wildcard) hosts.push(input.mdnsHostname || `${input.hostname.replace(/\.local$/i, '')}.local`);
  hosts.push(...listenAddresses(bindHost, input.interfaces));
  const urls = new Set<string>();
  for (const h of hosts) if (certificateCovers(input.certPem, h)) urls.add(httpsUrl(h, port));
  return [...urls];
}

export function bootBanner(built: BuiltApp, config: Config, port: number): string {
  const { hooks } = built;
  const network = hooks.network.maybe();
  const hostname = network?.hostname() ?? os.hostname();
  const urls = advertisedUrls({
    bindHost: config.host,
    port,
    hostname,
    mdnsHostname: network?.mdns().hostname,
    certPem: hooks.tls.maybe()?.current().cert,
  });
  const lines = [
    '',
    '  LIA — Local Inference Appliance',
    `  Host name     ${hostname}`,
    ...urls.map((u, i) => `  ${i === 0 ? 'URLs         ' : '             '} ${u}`),
  ];
  const sections = [...hooks.banner.list()].sort((a, b) => (a.order ?? 100) - (b.order ?? 100));
  for (const section of sections) {
    for (const [label, value] of section.lines({ port, hostname })) lines.push(`  ${label.padEnd(13)} ${value}`);
  }
  return lines.join('\n') + '\n\n';
}
