/**
 * The network provider: host name, interfaces and mDNS advertising of `_https._tcp` on the
 * appliance's port, through avahi where it runs, else the in-process responder. A new host name
 * is applied (persisted, or `hostnamectl` under systemd), re-advertised, and announced to the
 * `onChange` listeners (the PKI re-issues the TLS leaf there). Address changes are noticed by a
 * cheap poll of `os.networkInterfaces()` and announced the same way.
 *
 * @module
 */
import os from 'node:os';
import type { FastifyBaseLogger } from 'fastify';
import { Errors } from 'lia/plugin';
import type { MdnsState, NetworkInterfaceInfo, NetworkProvider } from './public.js';
import { VERSION } from 'lia/utils';
import { HOSTNAME_LABEL, loadHostname, sanitizeHostname, saveHostname, setSystemHostname } from './hostname.js';
import { addressSignature, listInterfaces, publicAddresses } from './interfaces.js';
import { AvahiAdvertiser, avahiRunning, type AvahiOptions } from './mdns/avahi.js';
import { EmbeddedResponder } from './mdns/responder.js';

/** Settings of the network provider (from the plugin options). */
export interface HostNetworkOptions {
  /** `embedded`: the appliance's own name; `system`: the machine's, through hostnamectl. */
  mode: 'embedded' | 'system';
  hostnamectl: string;
  dataDir: string;
  mdns: 'auto' | 'avahi' | 'embedded' | 'off';
  avahi: AvahiOptions;
  /** Service instance name; `{hostname}` is replaced by the host name. */
  instanceName: string;
  watchIntervalMs: number;
  timeoutMs: number;
  log: FastifyBaseLogger;
}

/** The `network` hook's provider; create it with {@link HostNetwork.create}. */
export class HostNetwork implements NetworkProvider {
  readonly #o: HostNetworkOptions;
  #name: string;
  #listeners: ((reason: string) => void)[] = [];
  #responder: EmbeddedResponder | null = null;
  #avahi: AvahiAdvertiser | null = null;
  #port: number | null = null;
  #mdnsError: string | null = null;
  /** The last `.local` name announced that differs from the host name (see #checkMdnsName). */
  #mdnsName: string | null = null;
  #signature = '';
  #watch: NodeJS.Timeout | null = null;

  private constructor(options: HostNetworkOptions, name: string) {
    this.#o = options;
    this.#name = name;
  }

  static async create(options: HostNetworkOptions): Promise<HostNetwork> {
    return new HostNetwork(options, await loadHostname(options.dataDir));
  }

  hostname(): string {
    return this.#name;
  }

  interfaces(): NetworkInterfaceInfo[] {
    return listInterfaces();
  }

  mdns(): MdnsState {
    const services = this.#port === null ? [] : [{ type: '_https._tcp', name: this.#instance(), port: this.#port }];
    if (this.#avahi) {
      // avahi's own answer over D-Bus; without D-Bus, the system name avahi starts with.
      const name = this.#avahi.hostname ?? `${sanitizeHostname(os.hostname())}.local`;
      return { enabled: true, responder: 'avahi', hostname: name, state: 'announced', error: null, services };
    }
    if (this.#responder) {
      const r = this.#responder;
      const instance = r.advertisement?.instance;
      return {
        enabled: true,
        responder: 'embedded',
        hostname: r.hostname,
        state: r.state,
        error: r.error,
        services: instance ? services.map((s) => ({ ...s, name: instance })) : services,
      };
    }
    return { enabled: false, responder: 'none', hostname: null, state: this.#mdnsError ? 'error' : 'stopped', error: this.#mdnsError, services: [] };
  }

  onChange(listener: (reason: string) => void): void {
    this.#listeners.push(listener);
  }

  async setHostname(name: string): Promise<void> {
    if (!HOSTNAME_LABEL.test(name)) throw Errors.badRequest(`host name "${name}" is not a valid DNS label`, { param: 'hostname' });
    if (name === this.#name) return;
    if (this.#o.mode === 'system') await setSystemHostname(this.#o.hostnamectl, name, this.#o.timeoutMs);
    else await saveHostname(this.#o.dataDir, name);
    const previous = this.#name;
    this.#name = name;
    this.#o.log.info({ previous, hostname: name }, 'host name changed');
    if (this.#avahi) {
      await this.#avahi.setHostName(name).catch((err: Error) => {
        this.#o.log.warn({ err: err.message }, 'avahi keeps its old host name; allow LIA to call SetHostName (systemd/avahi-dbus-lia.conf)');
      });
    }
    this.#emit('hostname');
    // Resolves once the new name is probed and announced, so the caller can report it.
    if (this.#responder) await this.#responder.update(this.#advertisement());
    this.#checkMdnsName();
  }

  /** Starts advertising `port` (called once the server listens) and the address watch. */
  async start(port: number): Promise<void> {
    this.#port = port;
    this.#signature = addressSignature(this.interfaces());
    this.#watch = setInterval(() => this.#checkAddresses(), this.#o.watchIntervalMs);
    this.#watch.unref();
    const mode = this.#o.mdns;
    if (mode === 'off') return;
    try {
      if (mode === 'avahi' || (mode === 'auto' && (await avahiRunning(this.#o.avahi.pidFile)))) {
        const avahi = new AvahiAdvertiser(this.#o.avahi);
        await avahi.publish(this.#o.instanceName.replace('{hostname}', '%h'), port, this.#txt());
        this.#avahi = avahi;
        this.#o.log.info({ file: this.#o.avahi.servicesDir, hostname: avahi.hostname }, 'mDNS: _https._tcp published through avahi');
        this.#checkMdnsName();
        return;
      }
      this.#responder = new EmbeddedResponder();
      void this.#responder.start(this.#advertisement()).then(() => {
        this.#o.log.info({ hostname: this.#responder?.hostname, port }, 'mDNS: _https._tcp announced by the embedded responder');
        this.#checkMdnsName();
      });
    } catch (err) {
      this.#mdnsError = (err as Error).message;
      this.#o.log.warn({ err: this.#mdnsError }, 'mDNS advertising is off');
    }
  }

  async stop(): Promise<void> {
    if (this.#watch) clearInterval(this.#watch);
    this.#watch = null;
    await this.#responder?.stop();
    this.#responder = null;
    await this.#avahi?.unpublish().catch(() => undefined);
    this.#avahi = null;
  }

  #instance(): string {
    return this.#o.instanceName.replace('{hostname}', this.#name);
  }

  #txt(): string[] {
    return ['path=/', `version=${VERSION}`];
  }

  #advertisement() {
    const { v4, v6 } = publicAddresses(this.interfaces());
    return { host: this.#name, instance: this.#instance(), port: this.#port ?? 0, txt: this.#txt(), v4, v6 };
  }

  #checkAddresses(): void {
    const signature = addressSignature(this.interfaces());
    if (signature === this.#signature) return;
    this.#signature = signature;
    this.#o.log.info('network addresses changed');
    if (this.#responder) void this.#responder.update(this.#advertisement());
    this.#emit('addresses');
  }

  /**
   * When mDNS took another name than the host name (another host holds it: `NAME-2.local`), tells
   * the listeners, so the PKI adds that name to the TLS leaf without a restart: clients that find
   * the appliance through mDNS must be able to verify it under the name they found.
   */
  #checkMdnsName(): void {
    const inUse = this.mdns().hostname;
    if (!inUse || inUse.toLowerCase() === `${this.#name}.local`.toLowerCase() || inUse === this.#mdnsName) return;
    this.#mdnsName = inUse;
    this.#o.log.warn({ hostname: this.#name, mdns: inUse }, `mDNS: another host holds ${this.#name}.local; announcing ${inUse} instead`);
    this.#emit('mdns-rename');
  }

  #emit(reason: string): void {
    for (const listener of this.#listeners) {
      try {
        listener(reason);
      } catch (err) {
        this.#o.log.error({ err }, 'a network change listener failed');
      }
    }
  }
}
