/**
 * The part of `multicast-dns` 7 (no bundled types) that the embedded responder uses.
 *
 * @module
 */
declare module 'multicast-dns' {
  import type { RemoteInfo } from 'node:dgram';

  export interface MdnsRecord {
    name: string;
    type: string;
    ttl?: number;
    class?: string;
    flush?: boolean;
    data?: unknown;
  }
  export interface MdnsQuestion {
    name: string;
    type: string;
  }
  export interface MdnsPacket {
    id?: number;
    type?: string;
    flags?: number;
    questions: MdnsQuestion[];
    answers: MdnsRecord[];
    authorities?: MdnsRecord[];
    additionals: MdnsRecord[];
  }
  export interface MdnsOptions {
    multicast?: boolean;
    interface?: string;
    port?: number;
    ip?: string;
    ttl?: number;
    loopback?: boolean;
    reuseAddr?: boolean;
    bind?: string | false;
  }
  export interface MulticastDns {
    on(event: 'query', listener: (packet: MdnsPacket, rinfo: RemoteInfo) => void): this;
    on(event: 'response', listener: (packet: MdnsPacket, rinfo: RemoteInfo) => void): this;
    on(event: 'ready', listener: () => void): this;
    on(event: 'error' | 'warning', listener: (err: Error) => void): this;
    query(packet: { questions: MdnsQuestion[] } | MdnsQuestion[], cb?: (err: Error | null) => void): void;
    respond(packet: { answers: MdnsRecord[]; additionals?: MdnsRecord[] }, cb?: (err: Error | null) => void): void;
    destroy(cb?: () => void): void;
  }
  export default function multicastDns(options?: MdnsOptions): MulticastDns;
}
