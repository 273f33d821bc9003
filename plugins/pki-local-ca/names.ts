/**
 * Which names a leaf certificate carries: `localhost`, `<host>.local`, the DNS names the operator
 * configured (those the root permits), loopback, and every interface address the root's Name
 * Constraints permit. The bare host name is never one of them: the root cannot safely permit a
 * single label (see certificates.ts), so clients use `<host>.local` or an address. One SAN outside
 * the constraints would invalidate the whole certificate, so public, Docker-bridge and IPv6
 * link-local addresses are left out.
 *
 * @module
 */
import net from 'node:net';
import os from 'node:os';
import { PERMITTED_DNS, PERMITTED_IP } from './certificates.js';

export interface SubjectNames {
  dnsNames: string[];
  ipAddresses: string[];
}

const blockList = new net.BlockList();
for (const cidr of PERMITTED_IP) {
  const [addr, prefix] = cidr.split('/') as [string, string];
  blockList.addSubnet(addr, Number(prefix), addr.includes(':') ? 'ipv6' : 'ipv4');
}

/** True when the root's constraints permit this address. */
export function isPermittedIp(address: string): boolean {
  const family = net.isIPv6(address) ? 'ipv6' : 'ipv4';
  return net.isIP(address) !== 0 && blockList.check(address, family);
}

/** True when `permitted` (a root's constrained names) allows this DNS name: equal or a subdomain. */
export function isPermittedDns(name: string, permitted: readonly string[] = PERMITTED_DNS): boolean {
  const n = name.toLowerCase();
  return permitted.some((d) => n === d || n.endsWith(`.${d}`));
}

/** Interfaces whose addresses never go into a certificate (container bridges, veth pairs). */
const SKIPPED_INTERFACE = /^(docker|br-|veth|virbr|cni|flannel)/;

/**
 * The names for a leaf: `permitted` is the list of DNS names the root allows (see
 * `permittedDnsOf`); of the operator's `extraNames`, those it allows are included.
 */
export function subjectNames(
  hostname: string,
  permitted: readonly string[] = PERMITTED_DNS,
  interfaces = os.networkInterfaces(),
  extraNames: readonly string[] = [],
): SubjectNames {
  const host = hostname.toLowerCase().replace(/\.local$/, '');
  const dns = new Set<string>(['localhost', `${host}.local`]);
  for (const name of extraNames) if (isPermittedDns(name, permitted)) dns.add(name.toLowerCase());
  const ips = new Set<string>(['127.0.0.1', '::1']);
  for (const [name, addrs] of Object.entries(interfaces)) {
    if (SKIPPED_INTERFACE.test(name)) continue;
    for (const a of addrs ?? []) {
      if (a.family === 'IPv6' && a.address.toLowerCase().startsWith('fe80')) continue;
      if (isPermittedIp(a.address)) ips.add(a.address);
    }
  }
  return { dnsNames: [...dns], ipAddresses: [...ips] };
}
