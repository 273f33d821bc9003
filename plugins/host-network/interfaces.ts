/**
 * The host's network interfaces from `os.networkInterfaces()` (instant, no tool spawned), with the
 * prefix length of each address and the MAC of each interface.
 *
 * @module
 */
import os from 'node:os';
import type { NetworkInterfaceInfo } from './public.js';

/** Every interface with its addresses; a MAC of all zeros (loopback, tunnels) is reported as null. */
export function listInterfaces(raw: NodeJS.Dict<os.NetworkInterfaceInfo[]> = os.networkInterfaces()): NetworkInterfaceInfo[] {
  return Object.entries(raw)
    .map(([name, list]) => {
      const entries = list ?? [];
      const mac = entries.find((e) => e.mac && e.mac !== '00:00:00:00:00:00')?.mac ?? null;
      return {
        name,
        mac,
        addresses: entries.map((e) => ({
          address: e.address,
          family: e.family,
          prefix: Number(e.cidr?.split('/')[1] ?? (e.family === 'IPv4' ? 32 : 128)),
          internal: e.internal,
        })),
      };
    })
    .sort((a, b) => a.name.localeCompare(b.name));
}

/** Addresses to publish over mDNS: non-internal ones. */
export function publicAddresses(interfaces: NetworkInterfaceInfo[]): { v4: string[]; v6: string[] } {
  const all = interfaces.flatMap((i) => i.addresses).filter((a) => !a.internal);
  return { v4: all.filter((a) => a.family === 'IPv4').map((a) => a.address), v6: all.filter((a) => a.family === 'IPv6').map((a) => a.address) };
}

/** A stable signature of the address set, to notice DHCP or link changes. */
export function addressSignature(interfaces: NetworkInterfaceInfo[]): string {
  return interfaces
    .flatMap((i) => i.addresses.filter((a) => !a.internal).map((a) => `${i.name}/${a.address}/${a.prefix}`))
    .sort()
    .join(',');
}
