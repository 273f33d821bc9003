/**
 * The installed models and what each can do, from `/api/tags` and `/api/show`. A remote model
 * (served by an upstream of the `backend-upstream` plugin) is listed with `remote_host` and
 * `remote_model`, the format `upstream` and size 0.
 */
import { json } from './api';

export interface TagModel {
  name: string;
  size: number;
  digest: string;
  modified_at: string;
  details: { format?: string; family?: string; parameter_size?: string; quantization_level?: string; broken?: string };
  /** The upstream(s) serving a remote model (replicas joined by `, `). */
  remote_host?: string;
  /** A remote model's name on its upstream. */
  remote_model?: string;
}

export interface ModelInfo extends TagModel {
  capabilities: string[];
  /** A speech model's voices, as `/api/show` lists them (empty for other models). */
  voices: string[];
}

export interface ShowResponse {
  capabilities?: string[];
  parameters?: string;
  template?: string;
  system?: string;
  license?: string;
  modelfile?: string;
  details?: Record<string, unknown>;
  model_info?: Record<string, unknown>;
  remote_host?: string;
  remote_model?: string;
  voices?: string[];
}

/** Every installed model with its capabilities and voices (one `/api/show` each, in parallel). */
export async function listModels(): Promise<ModelInfo[]> {
  const { models } = await json<{ models: TagModel[] }>('/api/tags');
  return Promise.all(
    models.map(async (m) => {
      const show = await json<ShowResponse>('/api/show', { body: { model: m.name } }).catch(() => ({}) as ShowResponse);
      const voices = Array.isArray(show.voices) ? show.voices.filter((v): v is string => typeof v === 'string') : [];
      return { ...m, capabilities: show.capabilities ?? [], voices };
    }),
  );
}

/** A model that can hold a conversation (not an embedding-only one). */
export function canChat(m: ModelInfo): boolean {
  return m.capabilities.includes('chat') || m.capabilities.includes('completion');
}

/** A model an upstream serves: it has no local files to size, copy or delete. */
export function isRemote(m: { remote_host?: string; details?: { format?: string } | null }): boolean {
  return m.remote_host !== undefined || m.details?.format === 'upstream';
}
