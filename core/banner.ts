/**
 * The console banner printed at boot, like the one a device shows on its screen: host name,
 * every URL the appliance answers on, the CA fingerprint to compare with the downloaded
 * certificate, and where the master key is kept. The key itself appears only on the boot that
 * created it (the key store reports that through `firstBootKey`).
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

function url(host: string, port: number): string {
  return `https://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

export function bootBanner(built: BuiltApp, config: Config, port: number): string {
  const { hooks } = built;
  const hostname = hooks.network.maybe()?.hostname() ?? os.hostname();
  const urls = new Set<string>();
  if (config.host === '0.0.0.0' || config.host === '::' || config.host === 'localhost' || config.host.startsWith('127.')) {
    urls.add(url('localhost', port));
  }
  if (config.host === '0.0.0.0' || config.host === '::') {
    urls.add(url(`${hostname}.local`, port));
    urls.add(url(hostname, port));
  }
  for (const a of listenAddresses(config.host)) urls.add(url(a, port));
  const tls = hooks.tls.maybe();
  const keys = hooks.keys.maybe() as (ReturnType<typeof hooks.keys.get> & { firstBootKey?: string | null }) | undefined;
  const lines = [
    '',
    '  LIA — Local Inference Appliance',
    `  Host name     ${hostname}`,
    ...[...urls].map((u, i) => `  ${i === 0 ? 'URLs         ' : '             '} ${u}`),
    `  CA SHA-256    ${tls ? tls.rootFingerprint() : '(no TLS plugin)'}`,
    `  CA download   ${url('localhost', port)}/system/ca-cert (compare the fingerprint above)`,
    `  Master key    ${keys ? keys.masterKeyPath : '(no key plugin)'}`,
  ];
  if (keys?.firstBootKey) {
    lines.push(`  New key       ${keys.firstBootKey}`, '                (shown once, on the boot that created it; `lia key show` reads the file)');
  }
  return lines.join('\n') + '\n\n';
}
