/**
 * What the device console shows, read from the running appliance's API in one round of parallel
 * requests: status, network (with the advertised URLs), services, loaded models, GPUs and the
 * recent warnings of each service's log. A part whose route fails (a disabled plugin, a stopped
 * service) is `null` with the reason in `errors`, so the rest still shows.
 *
 * @module
 */
import type { ApiClient } from 'lia/plugin';
import type { SystemStatus } from 'lia/host-services';
import { recentWarnings, type LogEntry, type Warning } from './format.js';

export interface ServiceRow {
  name: string;
  state: string;
  sub_state: string;
}

export interface LoadedModel {
  name: string;
  size: number;
  size_vram: number;
  /** Where it runs (`/api/ps` `device`): `cpu` or the GPU device. */
  device?: string;
}

export interface GpuDevice {
  name: string;
  vram_total_mb: number;
  vram_used_mb: number;
  temp_c: number | null;
}

export interface Snapshot {
  /** When the round finished (ms since the epoch). */
  at: number;
  status: SystemStatus | null;
  network: { hostname: string; urls?: string[]; mdns: { hostname: string | null; state?: string } } | null;
  services: ServiceRow[] | null;
  models: LoadedModel[] | null;
  gpu: { vendor: string; devices: GpuDevice[]; error: string | null } | null;
  warnings: Warning[];
  /** Whether this round read the logs (else `warnings` is empty and the previous ones stand). */
  logsRead: boolean;
  /** Why a part is missing, by part. */
  errors: Record<string, string>;
}

/** Warnings kept for the screen. */
export const WARNINGS_SHOWN = 5;
/** Log lines read per service to find them. */
const LOG_LINES = 50;

async function get<T>(client: ApiClient, path: string): Promise<T> {
  return client.json<T>('GET', path);
}

/**
 * One round of requests; never throws (failures land in `errors`). Without `withLogs` the six log
 * requests are skipped and `warnings` comes back empty (the caller keeps the last ones): the logs
 * are the costliest part of a round and change least.
 */
export async function readSnapshot(client: ApiClient, withLogs = true): Promise<Snapshot> {
  const errors: Record<string, string> = {};
  const part = async <T>(name: string, p: Promise<T>): Promise<T | null> => {
    try {
      return await p;
    } catch (err) {
      errors[name] = (err as Error).message;
      return null;
    }
  };
  // The logs are read per service, for the services the appliance lists.
  const listed = part('services', get<{ services: ServiceRow[] }>(client, '/system/services'));
  const [status, network, services, ps, gpu, logs] = await Promise.all([
    part('status', get<SystemStatus>(client, '/system/status')),
    part('network', get<NonNullable<Snapshot['network']>>(client, '/system/network')),
    listed,
    part('models', get<{ models: LoadedModel[] }>(client, '/api/ps')),
    part('gpu', get<NonNullable<Snapshot['gpu']>>(client, '/system/gpu')),
    withLogs
      ? part(
          'logs',
          listed.then((l) =>
            Promise.all(
              (l?.services ?? [])
                .map(({ name: s }) => s)
                .map(async (s) => [s, (await get<{ lines: LogEntry[] }>(client, `/system/logs?service=${s}&lines=${LOG_LINES}`)).lines] as const),
            ),
          ),
        )
      : null,
  ]);
  return {
    at: Date.now(),
    status,
    network,
    services: services?.services ?? null,
    models: ps?.models ?? null,
    gpu,
    warnings: logs ? recentWarnings(Object.fromEntries(logs), WARNINGS_SHOWN) : [],
    logsRead: logs !== null,
    errors,
  };
}
