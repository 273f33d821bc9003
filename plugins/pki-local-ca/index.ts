/**
 * The `pki-local-ca` plugin (service `svc-certs`): the appliance's own certificate authority.
 * On first boot it creates an ECDSA P-256 root (10 years, Name Constraints limited to local names
 * and the operator's `dnsNames`, never a bare single label, plus private address ranges with
 * `nameConstraints: strict`) and a TLS leaf (at most 397 days) for every name the appliance answers on;
 * afterwards it renews the leaf at 2/3 of its life or when the host name or an interface address
 * changes, and hands core the new credentials to swap in without a restart. It also serves the
 * public `GET /system/ca-cert`.
 *
 * @module
 */
import os from 'node:os';
import { Type } from '@sinclair/typebox';
import { definePlugin } from 'lia/plugin';
import type { TlsCredentials, TlsProvider } from 'lia/plugin/contracts';
import { advertisedUrls } from './advertise.js';
import { certificateCovers, fingerprint, permittedDnsOf } from './certificates.js';
import { caFiles, loadOrCreateRoot, loadOrIssueLeaf, rootFingerprintIn } from './ca.js';
import { isPermittedDns } from './names.js';

const Options = Type.Object(
  {
    /** Validity of a leaf in days (at most 397). Defaults to 397. */
    leafDays: Type.Integer({ minimum: 1, maximum: 397, default: 397 }),
    /** Fraction of a leaf's life after which it is renewed. Defaults to 2/3. */
    renewAfterRatio: Type.Number({ exclusiveMinimum: 0, maximum: 1, default: 2 / 3 }),
    /** How often the leaf is re-checked, in seconds. Defaults to 3600. */
    checkIntervalSeconds: Type.Integer({ minimum: 1, default: 3600 }),
    /**
     * More DNS names the appliance answers on (`lia.example.internal`), each with a dot: the root
     * permits them and the leaf carries them. Read when the root is created. Defaults to none.
     */
    dnsNames: Type.Array(
      Type.String({
        pattern: '^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\\.)+[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$',
        errorMessage: 'a lower-case DNS name with at least one dot, e.g. lia.example.internal',
      }),
      { default: [] },
    ),
    /**
     * What the root's Name Constraints cover. `compatible`: DNS names only, which every mainstream
     * TLS stack verifies (BoringSSL, and so Bun, Claude Code and opencode, refuses any root with an
     * address constraint). `strict`: private address ranges too, so a leaked root key cannot vouch
     * for a public address; Bun-based clients then cannot connect. A root made under the other
     * profile is re-issued at start with the same key. Defaults to `compatible`.
     */
    nameConstraints: Type.Union([Type.Literal('compatible'), Type.Literal('strict')], { default: 'compatible' }),
  },
  { additionalProperties: false },
);

export default definePlugin({
  name: 'pki-local-ca',
  apiVersion: 2,
  provides: ['tls'],
  uses: ['network'],
  description: 'Local CA: root with Name Constraints, TLS leaf renewal, hot swap, /system/ca-cert',
  services: [{ name: 'svc-certs', description: 'LIA certificates: local CA and TLS leaf renewal' }],
  options: Options,
  env: { LIA_CA_DNS_NAMES: 'dnsNames', LIA_CA_NAME_CONSTRAINTS: 'nameConstraints' },
  commands: async () => (await import('./cli/commands.js')).commands,
  async setup(app, ctx) {
    const files = caFiles(ctx.config.dataDir);
    const hostname = (): string => ctx.hooks.extensions.maybe('network')?.hostname() ?? os.hostname();
    // The `.local` name mDNS announces when it is not `<hostname>.local` (after a conflict it is
    // `<hostname>-2.local`): the leaf carries it too, so a client that found the box by it verifies.
    const mdnsNames = (): string[] => {
      const name = ctx.hooks.extensions.maybe('network')?.mdns().hostname;
      return name ? [name] : [];
    };
    let rootPem: string | null = null;
    let rootFp = '';
    let retiredFp: string | null = null;
    let previousFp: string | null = null;
    let credentials: TlsCredentials | null = null;
    let timer: NodeJS.Timeout | null = null;
    const listeners: ((c: TlsCredentials) => void)[] = [];
    let running: Promise<boolean> = Promise.resolve(false);

    /** Loads or creates everything; returns true when a new leaf was issued. Serialised. */
    const check = (reason: string): Promise<boolean> => {
      running = running
        .catch(() => false)
        .then(async () => {
          const now = new Date();
          const { root, created, replaced, reissued } = await loadOrCreateRoot(files, hostname(), now, ctx.options.dnsNames, ctx.options.nameConstraints);
          if (created) ctx.log.info({ fingerprint: fingerprint(root.certPem) }, 'created the local root CA');
          if (replaced) {
            ctx.log.warn(
              { previous: replaced.fingerprint, names: replaced.names, fingerprint: fingerprint(root.certPem) },
              'replaced the local root CA: the previous one permitted single-label names that may be public domains; clients must import the new root from /system/ca-cert',
            );
          }
          if (reissued) {
            ctx.log.warn(
              { previous: reissued.fingerprint, fingerprint: fingerprint(root.certPem), nameConstraints: reissued.profile },
              `re-issued the local root CA certificate with the same key under the ${reissued.profile} name constraints: clients that trust the previous certificate keep verifying; import the new one from /system/ca-cert where a client refused the previous one`,
            );
          }
          rootPem = root.certPem;
          rootFp = fingerprint(root.certPem);
          retiredFp = await rootFingerprintIn(files.retiredRoot);
          previousFp = await rootFingerprintIn(files.previousRoot);
          const unpermitted = ctx.options.dnsNames.filter((n) => !isPermittedDns(n, permittedDnsOf(root.certPem)));
          if (unpermitted.length > 0) {
            ctx.log.warn(
              { names: unpermitted },
              'these dnsNames were added after the root was made, which does not permit them; they are left out of the certificate',
            );
          }
          const { leaf, issued } = await loadOrIssueLeaf(
            files,
            root,
            hostname(),
            now,
            { days: ctx.options.leafDays, renewAfterRatio: ctx.options.renewAfterRatio },
            [...ctx.options.dnsNames, ...mdnsNames()],
          );
          const first = credentials === null;
          credentials = { key: leaf.keyPem, cert: leaf.certPem };
          if (issued) ctx.log.info({ reason: issued, trigger: reason }, 'issued a new TLS certificate');
          if (issued && !first) for (const l of listeners) l(credentials);
          return issued !== null;
        });
      return running;
    };

    // The URLs clients can verify: the names and addresses served, less those the leaf leaves out.
    const urls = (bindHost: string, port: number): string[] =>
      advertisedUrls({
        bindHost,
        port,
        hostname: hostname(),
        mdnsHostname: ctx.hooks.extensions.maybe('network')?.mdns().hostname,
        covers: (host) => certificateCovers(credentials?.cert, host),
      });
    const provider: TlsProvider = {
      current() {
        if (!credentials) throw new Error('svc-certs has not started: no TLS credentials yet');
        return credentials;
      },
      onChange(listener) {
        listeners.push(listener);
      },
      rootCertificatePem() {
        if (!rootPem) throw new Error('svc-certs has not started: no root CA yet');
        return rootPem;
      },
      rootFingerprint() {
        return rootFp;
      },
      refresh: (reason) => check(reason),
      advertisedUrls: urls,
    };
    ctx.hooks.tls.provide(provider, ctx.name);
    ctx.hooks.banner.register({
      name: 'urls',
      order: 0,
      lines: ({ port, hostname: name }) => [['Host name', name], ...urls(ctx.config.host, port).map((url, i) => [i === 0 ? 'URLs' : '', url] as const)],
    });
    ctx.hooks.banner.register({
      name: 'local-ca',
      order: 10,
      lines: ({ port }) => [
        ['CA SHA-256', rootFp],
        ['CA download', `https://localhost:${port}/system/ca-cert (compare the fingerprint above)`],
        ...(retiredFp
          ? ([
              ['CA replaced', `the previous root (SHA-256 ${retiredFp.slice(0, 23)}…) could sign for public names and is retired;`],
              ['', 'import the new root on every client and remove "LIA Local Root CA" entries with the old fingerprint;'],
              ['', `then delete ${files.retiredRoot} to hide this notice`],
            ] as const)
          : []),
        ...(previousFp
          ? ([
              ['CA re-issued', `same key, ${ctx.options.nameConstraints} name constraints (previous SHA-256 ${previousFp.slice(0, 23)}…);`],
              ['', 'clients that trust the previous certificate keep working; import the new one where a client refused it'],
              ['', `(Bun: Claude Code, opencode); then delete ${files.previousRoot} to hide this notice`],
            ] as const)
          : []),
      ],
    });

    ctx.hooks.services.implement('svc-certs', {
      async start() {
        await check('start');
        timer = setInterval(() => {
          check('timer').catch((err: unknown) => ctx.log.error({ err }, 'certificate check failed'));
        }, ctx.options.checkIntervalSeconds * 1000);
        timer.unref();
      },
      async stop() {
        if (timer) clearInterval(timer);
        timer = null;
      },
    });

    app.addHook('onReady', async () => {
      ctx.hooks.extensions.maybe('network')?.onChange((reason) => {
        check(`network: ${reason}`).catch((err: unknown) => ctx.log.error({ err }, 'certificate re-issue failed'));
      });
    });

    app.get('/system/ca-cert', { config: { public: true } }, async (_request, reply) => {
      const pem = rootPem ?? (await check('download').then(() => provider.rootCertificatePem()));
      return reply
        .header('Content-Type', 'application/x-pem-file')
        .header('Content-Disposition', 'attachment; filename="lia-root-ca.crt"')
        .header('X-Certificate-Fingerprint-SHA256', rootFp)
        .header('Cache-Control', 'no-cache')
        .send(pem);
    });
  },
});
