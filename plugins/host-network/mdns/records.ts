/**
 * DNS-SD records of the appliance (RFC 6763) and the answer to one mDNS question (RFC 6762):
 * `<host>.local` A/AAAA, `_https._tcp.local` PTR to the instance, the instance's SRV and TXT, and
 * the `_services._dns-sd._udp.local` enumeration PTR. Pure, so it is tested without sockets.
 *
 * @module
 */
import type { MdnsQuestion, MdnsRecord } from 'multicast-dns';

/** The DNS-SD service type the appliance advertises. */
export const SERVICE_TYPE = '_https._tcp.local';
const ENUMERATION = '_services._dns-sd._udp.local';
/** RFC 6762 §10: 120 s for records with a host name, 75 min for the others. */
const HOST_TTL = 120;
const OTHER_TTL = 4500;

/** What is advertised: host, instance, port, TXT strings and addresses. */
export interface Advertisement {
  /** The host label, without `.local`. */
  host: string;
  /** The service instance name, e.g. `LIA on lia-box`. */
  instance: string;
  port: number;
  txt: string[];
  v4: string[];
  v6: string[];
}

function same(a: string, b: string): boolean {
  return a.toLowerCase() === b.toLowerCase();
}

/** Every record of the advertisement (`ttl` 0 makes them goodbyes). */
export function allRecords(
  ad: Advertisement,
  ttl?: number,
): { host: MdnsRecord[]; ptr: MdnsRecord; srv: MdnsRecord; txt: MdnsRecord; enumeration: MdnsRecord } {
  const hostName = `${ad.host}.local`;
  const full = `${ad.instance}.${SERVICE_TYPE}`;
  const t = (v: number): number => ttl ?? v;
  return {
    host: [
      ...ad.v4.map((data) => ({ name: hostName, type: 'A', ttl: t(HOST_TTL), flush: true, data })),
      ...ad.v6.map((data) => ({ name: hostName, type: 'AAAA', ttl: t(HOST_TTL), flush: true, data })),
    ],
    ptr: { name: SERVICE_TYPE, type: 'PTR', ttl: t(OTHER_TTL), data: full },
    srv: { name: full, type: 'SRV', ttl: t(HOST_TTL), flush: true, data: { port: ad.port, weight: 0, priority: 0, target: hostName } },
    txt: { name: full, type: 'TXT', ttl: t(OTHER_TTL), flush: true, data: ad.txt },
    enumeration: { name: ENUMERATION, type: 'PTR', ttl: t(OTHER_TTL), data: SERVICE_TYPE },
  };
}

/** The answers and additional records for the questions we are authoritative for (empty if none). */
export function answer(ad: Advertisement, questions: MdnsQuestion[]): { answers: MdnsRecord[]; additionals: MdnsRecord[] } {
  const r = allRecords(ad);
  const hostName = `${ad.host}.local`;
  const full = `${ad.instance}.${SERVICE_TYPE}`;
  const answers: MdnsRecord[] = [];
  const additionals: MdnsRecord[] = [];
  for (const q of questions) {
    const any = q.type === 'ANY';
    if (same(q.name, hostName)) {
      answers.push(...r.host.filter((h) => any || h.type === q.type));
    } else if (same(q.name, SERVICE_TYPE) && (any || q.type === 'PTR')) {
      answers.push(r.ptr);
      additionals.push(r.srv, r.txt, ...r.host);
    } else if (same(q.name, full)) {
      if (any || q.type === 'SRV') answers.push(r.srv);
      if (any || q.type === 'TXT') answers.push(r.txt);
      additionals.push(...r.host);
    } else if (same(q.name, ENUMERATION) && (any || q.type === 'PTR')) {
      answers.push(r.enumeration);
    }
  }
  return { answers, additionals: answers.length > 0 ? additionals.filter((a) => !answers.includes(a)) : [] };
}
