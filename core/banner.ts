/**
 * The console banner printed at boot, like the one a device shows on its screen: a title, then
 * the sections plugins add through `hooks.banner`, in ascending `order` (the host name and the
 * URLs the certificate covers from the network provider, the CA fingerprint to compare with the
 * downloaded certificate, where the master key is kept, ...).
 *
 * @module
 */
import os from 'node:os';
import type { Config } from './config/schema.js';
import type { BuiltApp } from './http/app.js';

export function bootBanner(built: BuiltApp, config: Config, port: number): string {
  const { hooks } = built;
  // The network provider is host-network's contract (`lia/host-network`), which core does not
  // import: the banner reads only its host name.
  const network = hooks.extensions.maybe('network' as never) as { hostname(): string } | undefined;
  const hostname = network?.hostname() ?? os.hostname();
  const lines = ['', '  LIA — Local Inference Appliance'];
  const sections = [...hooks.banner.list()].sort((a, b) => (a.order ?? 100) - (b.order ?? 100));
  for (const section of sections) {
    for (const [label, value] of section.lines({ port, hostname })) lines.push(`  ${label.padEnd(13)} ${value}`);
  }
  return lines.join('\n') + '\n\n';
}
