/**
 * Where a registry may send the appliance. A registry answers with redirects (blobs usually live
 * on a storage host) and names a token service (the realm of its `WWW-Authenticate` challenge);
 * both are URLs the registry chooses, so a hostile registry could point the appliance at a file,
 * at a service on its own loopback or at the operator's internal network. The policy:
 *
 * - only `https:`, or `http:` as well when the registry itself is plain HTTP (`"insecure": true`);
 * - when the registry is on a public address, only public addresses: a literal private address is
 *   refused at once, and a host name connects only to the public addresses it resolves to (checked
 *   at connect time, so a name that resolves differently later cannot slip through);
 * - a registry on a private or loopback address (a LAN or test registry) may send the appliance
 *   anywhere on the network, as may any registry with `registryPrivateTargets` set.
 *
 * A refused target is a 502 naming the host, never the content of anything.
 *
 * @module
 */
import dns from 'node:dns';
import net, { BlockList, type LookupFunction } from 'node:net';
import { Errors } from 'lia/plugin';

/** Private, loopback, link-local, shared, multicast and reserved ranges. */
const PRIVATE = new BlockList();
for (const [addr, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 3],
] as const) {
  PRIVATE.addSubnet(addr, prefix, 'ipv4');
}
for (const [addr, prefix] of [
  ['::', 127],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const) {
  PRIVATE.addSubnet(addr, prefix, 'ipv6');
}

/** True for an IP address in a private, loopback or otherwise non-public range. */
export function isPrivateAddress(address: string): boolean {
  const family = net.isIP(address);
  if (family === 4) return PRIVATE.check(address, 'ipv4');
  if (family !== 6) return false;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  return mapped ? PRIVATE.check(mapped[1]!, 'ipv4') : PRIVATE.check(address, 'ipv6');
}

/** A URL's host name without the brackets of an IPv6 literal. */
const bare = (url: URL): string => url.hostname.replace(/^\[|\]$/g, '');

/** Applies the policy of this module. */
export class TargetPolicy {
  /** Whether a registry's host is private, by host name (looked up once; kept for the process). */
  readonly #privateHosts = new Map<string, Promise<boolean>>();

  constructor(readonly allowPrivate: boolean) {}

  /** Throws a 502 unless `url`'s scheme is `https:` (or `http:` for a plain HTTP `origin`). */
  checkScheme(url: URL, origin: URL, what: string): void {
    if (url.protocol === 'https:' || (url.protocol === 'http:' && origin.protocol === 'http:')) return;
    throw Errors.badGateway(
      `registry ${origin.host} sent a ${what} to a "${url.protocol}" URL; only ${origin.protocol === 'http:' ? 'http: and https:' : 'https:'} is followed`,
    );
  }

  /**
   * Checks a URL on another host than the registry (`origin`): its scheme, and its address when
   * the registry is public. Returns the DNS lookup to connect with (undefined: any address).
   */
  async check(url: URL, origin: URL, what: string): Promise<LookupFunction | undefined> {
    this.checkScheme(url, origin, what);
    if (this.allowPrivate || (await this.#isPrivateHost(bare(origin)))) return undefined;
    const host = bare(url);
    if (isPrivateAddress(host) || host === 'localhost' || host.endsWith('.localhost')) {
      throw Errors.badGateway(`registry ${origin.host} sent a ${what} to ${url.host}, a private address; a public registry may not lead there`);
    }
    return publicOnly;
  }

  #isPrivateHost(host: string): Promise<boolean> {
    if (net.isIP(host)) return Promise.resolve(isPrivateAddress(host));
    let known = this.#privateHosts.get(host);
    if (!known) {
      known = dns.promises.lookup(host, { all: true }).then(
        (all) => host === 'localhost' || all.some((a) => isPrivateAddress(a.address)),
        () => false,
      );
      if (this.#privateHosts.size > 256) this.#privateHosts.clear();
      this.#privateHosts.set(host, known);
    }
    return known;
  }
}

/** A DNS lookup that gives only the public addresses of a name, and fails when it has none. */
const publicOnly: LookupFunction = (hostname, options, callback) => {
  dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err) return callback(err, '', 0);
    const usable = addresses.filter((a) => !isPrivateAddress(a.address));
    if (usable.length === 0) {
      return callback(Object.assign(new Error(`${hostname} resolves to a private address`), { code: 'LIA_PRIVATE' }), '', 0);
    }
    if (options.all) return (callback as unknown as (e: null, a: dns.LookupAddress[]) => void)(null, usable);
    callback(null, usable[0]!.address, usable[0]!.family);
  });
};
