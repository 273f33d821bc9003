/**
 * The console banner printed at boot, like the one a device shows on its screen: host name and
 * every URL the appliance answers on, then the sections plugins add through `hooks.banner` (the
 * CA fingerprint to compare with the downloaded certificate, where the master key is kept, ...).
 *
 * @module
 */
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

export function bootBanner(built: BuiltApp, config: Config, port: number): string {
  const { hooks } = built;
  const hostname = hooks.network.maybe()?.hostname() ?? os.hostname();
  const urls = new Set<string>();
  if (config.host === '0.0.0.0' || config.host === '::' || config.host === 'localhost' || config.host.startsWith('127.')) {
    urls.add(httpsUrl('localhost', port));
  }
  // The bare host name is not listed: the certificate cannot carry a single-label name (see
  // docs/security.md), so clients use NAME.local or an address.
  if (config.host === '0.0.0.0' || config.host === '::') urls.add(httpsUrl(`${hostname.replace(/\.local$/i, '')}.local`, port));
  for (const a of listenAddresses(config.host)) urls.add(httpsUrl(a, port));
  const lines = [
    '',
    '  LIA — Local Inference Appliance',
    `  Host name     ${hostname}`,
    ...[...urls].map((u, i) => `  ${i === 0 ? 'URLs         ' : '             '} ${u}`),
  ];
  const sections = [...hooks.banner.list()].sort((a, b) => (a.order ?? 100) - (b.order ?? 100));
  for (const section of sections) {
    for (const [label, value] of section.lines({ port, hostname })) lines.push(`  ${label.padEnd(13)} ${value}`);
  }
  return lines.join('\n') + '\n\n';
}
