/**
 * `GET /system/network` (host name, interfaces, mDNS state) and
 * `POST /system/network/hostname?hostname=NEW` (or a JSON body `{"hostname"}`): validates the name
 * as one RFC 1123 label, applies it through the network provider (which re-advertises over mDNS
 * and tells its listeners, the PKI among them), asks the TLS provider to re-check the leaf, and
 * reports whether the served certificate now covers `<name>.local`.
 *
 * @module
 */
import { X509Certificate } from 'node:crypto';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { AddressInfo } from 'node:net';
import { Errors, type Hooks } from 'lia/plugin';

/** One DNS label (RFC 1123): 1–63 letters, digits and hyphens, not starting or ending with a hyphen. */
export const HOSTNAME_LABEL = /^(?=.{1,63}$)[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$/;

/** Validates and lower-cases a host name; throws 400 with the rule that failed. */
export function validateHostname(raw: unknown): string {
  if (typeof raw !== 'string' || raw.trim() === '')
    throw Errors.badRequest('missing "hostname": POST /system/network/hostname?hostname=NEW', { param: 'hostname' });
  const name = raw.trim().toLowerCase();
  if (name.length > 63) throw Errors.badRequest(`host name "${raw}" is longer than 63 characters`, { param: 'hostname' });
  if (name.endsWith('.local')) throw Errors.badRequest(`give the host name without ".local" (got "${raw}")`, { param: 'hostname' });
  if (name.includes('.')) throw Errors.badRequest(`host name "${raw}" must be a single label, without dots`, { param: 'hostname' });
  if (!HOSTNAME_LABEL.test(name)) {
    throw Errors.badRequest(`host name "${raw}" is not valid: use letters, digits and hyphens, not starting or ending with a hyphen`, { param: 'hostname' });
  }
  return name;
}

function covers(certPem: string, name: string): boolean {
  try {
    return new X509Certificate(certPem).checkHost(`${name}.local`) !== undefined;
  } catch {
    return false;
  }
}

/**
 * Registers `GET /system/network` and `POST /system/network/hostname`. `GET` also answers `urls`:
 * the https URLs the appliance advertises (the boot banner's list: only names and addresses the
 * served certificate covers), which the device console shows.
 */
export function networkRoutes(app: FastifyInstance, hooks: Hooks, bindHost: string): void {
  app.get('/system/network', { config: { scope: 'system:read' } }, async (_request, reply) => {
    const net = hooks.extensions.get('network');
    const mdns = net.mdns();
    const port = (app.server.address() as AddressInfo | null)?.port ?? 0;
    const urls = hooks.tls.maybe()?.advertisedUrls?.(bindHost, port) ?? [];
    return reply.header('Cache-Control', 'no-store').send({ hostname: net.hostname(), interfaces: net.interfaces(), mdns, urls });
  });

  app.post<{ Querystring: { hostname?: string }; Body: unknown }>(
    '/system/network/hostname',
    { config: { scope: 'system:admin' }, schema: { querystring: Type.Object({ hostname: Type.Optional(Type.String()) }) } },
    async (request, reply) => {
      const body = request.body as { hostname?: unknown } | undefined;
      const fromBody = body && typeof body === 'object' && !Array.isArray(body) ? body.hostname : undefined;
      if (request.query.hostname !== undefined && fromBody !== undefined && request.query.hostname !== fromBody) {
        throw Errors.badRequest('two different host names in the query and the body', { param: 'hostname' });
      }
      const name = validateHostname(request.query.hostname ?? fromBody);
      const net = hooks.extensions.get('network');
      const previous = net.hostname();
      const tls = hooks.tls.maybe();
      const certBefore = tls?.current().cert;
      await net.setHostname(name);
      // The PKI also re-checks on the network provider's change event; checks are serialised, so
      // awaiting one here means the leaf is settled when we answer.
      if (tls) {
        try {
          await tls.refresh(`host name changed from ${previous} to ${name}`);
        } catch (err) {
          request.log.error({ err }, 'TLS re-check after the host name change failed');
        }
      }
      const certAfter = tls?.current().cert;
      return reply.send({
        hostname: name,
        previous,
        mdns: net.mdns(),
        certificate: { reissued: certAfter !== undefined && certAfter !== certBefore, covers_hostname: certAfter ? covers(certAfter, name) : false },
      });
    },
  );
}
