/**
 * The in-process mDNS responder (for machines without avahi), on the `multicast-dns` package. It
 * probes its host name first (three queries 250 ms apart, RFC 6762 §8.1) and takes `<name>-2`,
 * `-3`, ... when another host answers for it, then announces twice and answers queries. A rename
 * sends goodbyes (TTL 0) for the old records before probing the new name; `stop()` sends goodbyes
 * for everything.
 *
 * @module
 */
import multicastDns, { type MdnsPacket, type MulticastDns } from 'multicast-dns';
import { allRecords, answer, type Advertisement } from './records.js';

/** Where the responder is: probing its name, announced, stopped, or failed (socket error). */
export type ResponderState = 'probing' | 'announced' | 'stopped' | 'error';

/** One in-process mDNS responder for the appliance's host name and `_https._tcp` instance. */
export class EmbeddedResponder {
  #socket: MulticastDns | null = null;
  #ad: Advertisement | null = null;
  #state: ResponderState = 'stopped';
  #error: string | null = null;
  #generation = 0;

  get state(): ResponderState {
    return this.#state;
  }

  get error(): string | null {
    return this.#error;
  }

  /** The name in use after probing (null while probing). */
  get hostname(): string | null {
    return this.#ad ? `${this.#ad.host}.local` : null;
  }

  get advertisement(): Advertisement | null {
    return this.#ad;
  }

  /** Opens the socket and publishes `ad`; resolves once the name is probed and announced. */
  async start(ad: Advertisement): Promise<void> {
    if (!this.#socket) {
      const socket = multicastDns({ loopback: true, reuseAddr: true });
      socket.on('error', (err) => {
        this.#state = 'error';
        this.#error = err.message;
      });
      socket.on('warning', () => undefined);
      socket.on('query', (packet) => this.#onQuery(packet));
      this.#socket = socket;
    }
    await this.update(ad);
  }

  /** Re-publishes with new data (host name, addresses or port); probes when the host name changed. */
  async update(ad: Advertisement): Promise<void> {
    const socket = this.#socket;
    if (!socket) return;
    const generation = ++this.#generation;
    const old = this.#ad;
    if (old && old.host.toLowerCase() === ad.host.toLowerCase()) {
      this.#ad = { ...ad, host: old.host };
      this.#announce();
      return;
    }
    if (old) this.#goodbye(old);
    this.#ad = null;
    this.#state = 'probing';
    const host = await this.#probe(socket, ad.host, generation);
    if (generation !== this.#generation || !this.#socket) return;
    this.#ad = { ...ad, host };
    this.#state = 'announced';
    this.#announce();
    setTimeout(() => generation === this.#generation && this.#announce(), 1000).unref();
  }

  /** Sends goodbyes and closes the socket. */
  async stop(): Promise<void> {
    this.#generation++;
    const socket = this.#socket;
    if (!socket) return;
    if (this.#ad) this.#goodbye(this.#ad);
    this.#socket = null;
    this.#ad = null;
    this.#state = 'stopped';
    await new Promise<void>((resolve) => setTimeout(() => socket.destroy(() => resolve()), 50));
  }

  #onQuery(packet: MdnsPacket): void {
    const ad = this.#ad;
    if (!ad || !this.#socket || this.#state !== 'announced') return;
    const reply = answer(ad, packet.questions ?? []);
    if (reply.answers.length > 0) this.#socket.respond(reply);
  }

  #announce(): void {
    const ad = this.#ad;
    if (!ad || !this.#socket) return;
    const r = allRecords(ad);
    this.#socket.respond({ answers: [...r.host, r.ptr, r.srv, r.txt, r.enumeration] });
  }

  #goodbye(ad: Advertisement): void {
    const r = allRecords(ad, 0);
    this.#socket?.respond({ answers: [...r.host, r.ptr, r.srv, r.txt] });
  }

  /** Finds a free name: `base`, then `base-2`, `base-3`, ... (up to -9, then keeps the last). */
  async #probe(socket: MulticastDns, base: string, generation: number): Promise<string> {
    for (let n = 1; n <= 9; n++) {
      const candidate = n === 1 ? base : `${base.slice(0, 60)}-${n}`;
      const taken = await new Promise<boolean>((resolve) => {
        const fqdn = `${candidate}.local`.toLowerCase();
        let seen = false;
        const onResponse = (packet: MdnsPacket): void => {
          if ([...(packet.answers ?? []), ...(packet.additionals ?? [])].some((a) => a.name.toLowerCase() === fqdn && a.ttl !== 0)) seen = true;
        };
        socket.on('response', onResponse);
        let sent = 0;
        const tick = (): void => {
          if (seen || sent === 3 || generation !== this.#generation) {
            (socket as unknown as NodeJS.EventEmitter).removeListener('response', onResponse);
            resolve(seen);
            return;
          }
          sent++;
          socket.query({ questions: [{ name: `${candidate}.local`, type: 'ANY' }] });
          setTimeout(tick, 250);
        };
        tick();
      });
      if (!taken || generation !== this.#generation) return candidate;
    }
    return `${base.slice(0, 60)}-9`;
  }
}
