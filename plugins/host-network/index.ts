/**
 * The `host-network` plugin: fills the `network` hook (host name, interfaces, mDNS). mDNS starts
 * once the HTTPS server listens, so it advertises the port actually bound, and stops with the app
 * (goodbye packets, or the avahi service file removed).
 *
 * @module
 */
import { existsSync } from 'node:fs';
import { Type } from '@sinclair/typebox';
import { definePlugin } from 'lia/plugin';
import { HostNetwork } from './provider.js';

const options = Type.Object(
  {
    /**
     * `auto` (system when started by systemd, else embedded), `embedded` (the appliance's own
     * name, kept in the data dir) or `system` (the machine's, through hostnamectl). Defaults to `auto`.
     */
    hostnameMode: Type.Union([Type.Literal('auto'), Type.Literal('embedded'), Type.Literal('system')], { default: 'auto' }),
    /** The hostnamectl executable. Defaults to `hostnamectl`. */
    hostnamectl: Type.String({ default: 'hostnamectl', minLength: 1 }),
    /** `auto` (avahi when it runs, else the embedded responder), `avahi`, `embedded` or `off`. Defaults to `auto`. */
    mdns: Type.Union([Type.Literal('auto'), Type.Literal('avahi'), Type.Literal('embedded'), Type.Literal('off')], { default: 'auto' }),
    /** Service instance name; `{hostname}` becomes the host name. Defaults to `LIA on {hostname}`. */
    instanceName: Type.String({ default: 'LIA on {hostname}', minLength: 1, maxLength: 63 }),
    /** avahi's static services folder. Defaults to `/etc/avahi/services`. */
    avahiServicesDir: Type.String({ default: '/etc/avahi/services', minLength: 1 }),
    /** avahi-daemon's pid file (how a running avahi is detected). Defaults to `/run/avahi-daemon/pid`. */
    avahiPidFile: Type.String({ default: '/run/avahi-daemon/pid', minLength: 1 }),
    /** Milliseconds between checks for address changes. Defaults to 10000. */
    watchIntervalMs: Type.Integer({ default: 10_000, minimum: 500 }),
    /** Deadline of one host tool call in ms. Defaults to 10000. */
    timeoutMs: Type.Integer({ default: 10_000, minimum: 100 }),
  },
  { additionalProperties: false },
);

/** The host-network plugin. */
export default definePlugin({
  name: 'host-network',
  apiVersion: 2,
  provides: ['network'],
  description: 'Host name, interfaces and mDNS (_https._tcp through avahi or an in-process responder)',
  options,
  env: { LIA_MDNS: 'mdns', LIA_HOSTNAME_MODE: 'hostnameMode' },
  async setup(app, ctx) {
    const o = ctx.options;
    const bySystemd = existsSync('/run/systemd/system') && Boolean(process.env['INVOCATION_ID']);
    const network = await HostNetwork.create({
      mode: o.hostnameMode === 'auto' ? (bySystemd ? 'system' : 'embedded') : o.hostnameMode,
      hostnamectl: o.hostnamectl,
      dataDir: ctx.config.dataDir,
      mdns: o.mdns,
      avahi: {
        servicesDir: o.avahiServicesDir,
        pidFile: o.avahiPidFile,
        busctl: 'busctl',
        setHostName: 'avahi-set-host-name',
        timeoutMs: Math.min(o.timeoutMs, 3000),
      },
      instanceName: o.instanceName,
      watchIntervalMs: o.watchIntervalMs,
      timeoutMs: o.timeoutMs,
      log: ctx.log,
    });
    ctx.hooks.extensions.provide('network', network, 'host-network');
    app.server.once('listening', () => {
      const address = app.server.address();
      const port = typeof address === 'object' && address ? address.port : ctx.config.port;
      void network.start(port);
    });
    app.addHook('onClose', async () => network.stop());
  },
});
