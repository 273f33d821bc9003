/** The installed models and what each can do, from `/api/tags` and `/api/show`. */
import { json } from './api';

export interface TagModel {
  name: string;
  size: number;
  digest: string;
  modified_at: string;
  details: { format?: string; family?: string; parameter_size?: string; quantization_level?: string; broken?: string };
}

export interface ModelInfo extends TagModel {
  capabilities: string[];
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
}

/** Every installed model with its capabilities (one `/api/show` each, in parallel). */
export async function listModels(): Promise<ModelInfo[]> {
  const { models } = await json<{ models: TagModel[] }>('/api/tags');
  return Promise.all(
    models.map(async (m) => {
      const show = await json<ShowResponse>('/api/show', { body: { model: m.name } }).catch(() => ({}) as ShowResponse);
      return { ...m, capabilities: show.capabilities ?? [] };
    }),
  );
}

/** A model that can hold a conversation (not an embedding-only one). */
export function canChat(m: ModelInfo): boolean {
  return m.capabilities.includes('chat') || m.capabilities.includes('completion');
}
