/**
 * `GET /api/ps` (the loaded models) and `GET /api/version`.
 *
 * @module
 */
import type { FastifyInstance } from 'fastify';
import { principalMayUse, VERSION } from 'lia/utils';
import type { InferenceService } from '../public.js';
import type { ModelDetails } from 'lia/model-store';
import { PsResponse, VersionResponse } from './schemas.js';

/**
 * The Ollama version `/api/version` reports. Integrations gate features on it, so it names the
 * newest Ollama release whose API this engine serves in full (`think` levels, `/api/ps`
 * `context_length`), not a later one whose features it lacks; LIA's own version is in
 * `lia_version`. docs/compatibility.md explains the choice.
 */
export const OLLAMA_COMPAT_VERSION = '0.11.0';

export function psRoutes(app: FastifyInstance, service: () => InferenceService, details: (name: string) => ModelDetails | undefined): void {
  app.get('/api/ps', { schema: { response: { 200: PsResponse } }, config: { scope: 'models:read' } }, async () => ({
    models: service()
      .ps()
      .filter((m) => principalMayUse(m.name)) // a key with a model allow-list sees only its models
      .map((m) => ({
        name: m.name,
        model: m.model,
        size: m.size,
        digest: m.digest,
        details: details(m.name) ?? null,
        expires_at: m.expires_at,
        size_vram: m.size_vram,
        context_length: m.context_length,
        engine: m.engine,
        device: m.device,
        parallel: m.parallel,
        running: m.running,
        queued: m.queued,
        kv_cache_type: m.kv_cache_type,
        flash_attention: m.flash_attention,
        ...(m.draft_model !== undefined ? { draft_model: m.draft_model } : {}),
        ...(m.draft_ngram !== undefined ? { draft_ngram: m.draft_ngram } : {}),
        ...(m.draft_num_predict !== undefined ? { draft_num_predict: m.draft_num_predict } : {}),
      })),
  }));

  app.get('/api/version', { schema: { response: { 200: VersionResponse } }, config: { scope: 'models:read' } }, async () => ({
    version: OLLAMA_COMPAT_VERSION,
    lia_version: VERSION,
  }));
}
