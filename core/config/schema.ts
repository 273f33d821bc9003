/**
 * The configuration schema and the table of settings that drives `lia serve --help`, the startup
 * log and `docs/configuration.md`. Every setting has a name, an environment variable, a default
 * and a description, in one place.
 *
 * @module
 */
import os from 'node:os';
import path from 'node:path';
import { Type, type Static } from '@sinclair/typebox';

/** One plugin entry: `true`/`false`, or an object with `enabled`, `module` and `options`. */
export const PluginEntrySchema = Type.Union([
  Type.Boolean(),
  Type.Object(
    {
      /** Defaults to `true`. */
      enabled: Type.Optional(Type.Boolean()),
      /**
       * Where a third-party plugin lives: an npm package name or a path (relative to the config
       * file). Built-in plugins need none.
       */
      module: Type.Optional(Type.String({ minLength: 1 })),
      /** The plugin's own options, validated against the schema the plugin declares. */
      options: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    },
    { additionalProperties: false },
  ),
]);
export type PluginEntry = Static<typeof PluginEntrySchema>;

export const ConfigSchema = Type.Object(
  {
    host: Type.String({ minLength: 1 }),
    port: Type.Integer({ minimum: 0, maximum: 65535 }),
    dataDir: Type.String({ minLength: 1 }),
    logLevel: Type.Union(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l))),
    /** How log lines are written: `auto` (readable on a terminal, JSON otherwise), `json` or `pretty`. Defaults to `auto`. */
    logFormat: Type.Union([Type.Literal('auto'), Type.Literal('json'), Type.Literal('pretty')]),
    bodyLimit: Type.Integer({ minimum: 1024 }),
    /**
     * Milliseconds the requests in flight get to finish after SIGTERM/SIGINT before they are
     * ended with an error (core/http/drain.ts). Defaults to 10000.
     */
    shutdownGraceMs: Type.Integer({ minimum: 0 }),
    /** Milliseconds a client gets to finish the TLS handshake (core/http/connections.ts). Defaults to 10000. */
    tlsHandshakeTimeoutMs: Type.Integer({ minimum: 500 }),
    /**
     * Milliseconds from a connection being ready (or a kept-alive request's first byte) until the
     * request's headers must be complete, else 408 and the connection closes. Defaults to 10000.
     */
    headersTimeoutMs: Type.Integer({ minimum: 500 }),
    /** Milliseconds an idle kept-alive connection stays open. Defaults to 72000. */
    keepAliveTimeoutMs: Type.Integer({ minimum: 1000 }),
    /**
     * Open connections on which no request has passed the auth gate yet; over it, the one idle
     * the longest is closed. Defaults to 256.
     */
    maxUnauthenticatedConnections: Type.Integer({ minimum: 1 }),
    /** Open connections in all; over it, the one idle the longest is closed (one without a key first). Defaults to 1024. */
    maxConnections: Type.Integer({ minimum: 1 }),
    plugins: Type.Record(Type.String({ pattern: '^[a-z0-9@][a-z0-9._/@-]*$' }), PluginEntrySchema),
    /**
     * The services the appliance has, in start order: `/health` and `/system/services` list each
     * one, `inactive` while no enabled plugin declares it. Plugins declare the services they run
     * (`PluginSpec.services`); one they declare beyond this list starts after it. Defaults to the
     * interface's six (`config/lia.default.yaml`).
     */
    services: Type.Array(Type.String({ pattern: '^[a-z][a-z0-9-]{0,63}$' }), { uniqueItems: true }),
    /**
     * Which backend serves a model format that several enabled backends claim, or one that runs
     * it beside its own backend: format name → backend name (`llama-cpp`) or plugin name
     * (`backend-llama-cpp`); a key with a `:` names one model (`llava:7b: llama-server`).
     * Defaults to `{}`.
     */
    /**
     * Origins (`https://app.example.com`, scheme, host and port, no path) whose browser pages may
     * call the APIs (CORS). Defaults to none.
     */
    corsOrigins: Type.Array(
      Type.String({ pattern: '^https?://[^/?#*\\s]+$', errorMessage: 'an origin is a scheme and a host with an optional port, e.g. https://app.example.com' }),
    ),
    backends: Type.Record(Type.String({ pattern: '^([a-z0-9][a-z0-9_-]{0,31}|[^\\s:]{1,256}:[^\\s:]{1,128})$' }), Type.String({ minLength: 1 })),
  },
  { additionalProperties: false },
);

/** The validated, frozen configuration every part of the appliance reads. */
export type Config = Readonly<Static<typeof ConfigSchema>> & {
  /** The file the configuration came from, or null when only defaults and env were used. */
  readonly source: string | null;
};

export interface SettingDoc {
  key: keyof Static<typeof ConfigSchema>;
  env: string;
  flag?: string;
  default: unknown;
  description: string;
}

/** Default data directory: `$XDG_DATA_HOME/lia`, else `~/.local/share/lia`. */
function defaultDataDir(): string {
  const xdg = process.env['XDG_DATA_HOME'];
  return path.join(xdg && path.isAbsolute(xdg) ? xdg : path.join(os.homedir(), '.local', 'share'), 'lia');
}

/** The core settings. Plugins document their own options (see docs/configuration.md). */
export const SETTINGS: readonly SettingDoc[] = [
  {
    key: 'host',
    env: 'LIA_HOST',
    flag: '--host',
    default: '::',
    description:
      'Address the HTTPS server binds to. `::` (dual stack) answers on every interface, IPv4 and IPv6; `0.0.0.0` on every IPv4 interface only; `127.0.0.1` on the machine only. On a kernel without IPv6, `::` falls back to `0.0.0.0`.',
  },
  {
    key: 'port',
    env: 'LIA_PORT',
    flag: '--port',
    default: 8443,
    description: 'HTTPS port. 0 picks a free port (tests).',
  },
  {
    key: 'dataDir',
    env: 'LIA_DATA_DIR',
    flag: '--data-dir',
    default: defaultDataDir(),
    description: 'Where the CA, the keys, the models and the logs live. Created 0700 on first start.',
  },
  {
    key: 'logLevel',
    env: 'LIA_LOG_LEVEL',
    default: 'info',
    description: 'fatal, error, warn, info, debug, trace or silent.',
  },
  {
    key: 'logFormat',
    env: 'LIA_LOG_FORMAT',
    default: 'auto',
    description:
      'How log lines look: `auto` prints readable lines (time, level, message) when stdout is a terminal and one JSON object per line otherwise (journald, files, log shippers); `json` or `pretty` force one. `/system/logs` is the same either way.',
  },
  {
    key: 'bodyLimit',
    env: 'LIA_BODY_LIMIT',
    default: 8 * 1024 * 1024,
    description: 'Largest JSON request body in bytes; larger ones get 413. Blob uploads have their own limit.',
  },
  {
    key: 'shutdownGraceMs',
    env: 'LIA_SHUTDOWN_GRACE_MS',
    default: 10_000,
    description:
      "At SIGTERM or SIGINT, how long the requests in flight get to finish, in milliseconds. New requests get 503 meanwhile; a stream still running at the end ends with an error frame. Keep it well below systemd's stop timeout (90 s).",
  },
  {
    key: 'tlsHandshakeTimeoutMs',
    env: 'LIA_TLS_HANDSHAKE_TIMEOUT_MS',
    default: 10_000,
    description: 'How long a client gets to finish the TLS handshake, in milliseconds; then the connection is closed.',
  },
  {
    key: 'headersTimeoutMs',
    env: 'LIA_HEADERS_TIMEOUT_MS',
    default: 10_000,
    description:
      'How long a connection may stay without complete request headers, in milliseconds, counted from the end of the handshake (or from the first byte of a request on a kept-alive connection); then 408 and the connection is closed. Checked every second. Request bodies and responses have no time limit.',
  },
  {
    key: 'keepAliveTimeoutMs',
    env: 'LIA_KEEP_ALIVE_TIMEOUT_MS',
    default: 72_000,
    description: 'How long an idle kept-alive connection stays open between requests, in milliseconds.',
  },
  {
    key: 'maxUnauthenticatedConnections',
    env: 'LIA_MAX_UNAUTHENTICATED_CONNECTIONS',
    default: 256,
    description:
      'Open connections on which no request has shown a valid key yet (handshaking, idle, `/health` probes). Over it, the one idle the longest is closed; a new connection is refused only when every one is busy.',
  },
  {
    key: 'maxConnections',
    env: 'LIA_MAX_CONNECTIONS',
    default: 1024,
    description:
      'Open connections in all. Over it, the one idle the longest is closed, one without a key first, else an idle kept-alive one with a key; a new connection is refused only when every one is busy.',
  },
  {
    key: 'corsOrigins',
    env: 'LIA_ORIGINS',
    default: [],
    description:
      'Origins whose web pages may call the APIs from a browser (CORS), e.g. `[https://chat.example.com]`; the variable takes a comma-separated list. Defaults to none: no `Access-Control-*` headers. Requests still need the key; only preflights pass without one.',
  },
  {
    key: 'backends',
    env: 'LIA_BACKENDS',
    default: {},
    description:
      'Which inference backend serves a model format that two enabled backends claim, or that a backend such as `llama-server` runs beside the format\'s own: format → backend or plugin name, e.g. `{ gguf: backend-llama-cpp }`; a key with a `:` chooses for one model, e.g. `{ "qwen2.5vl:3b": llama-server }`. The variable takes `gguf=backend-llama-cpp,onnx=transformers`. Without a choice, two claimants stop the start with exit code 2 naming both, a model with a vision projector goes to a backend that takes images, and a reranker to llama-server when its binary is built (docs/backends.md).',
  },
];
