/**
 * Which blobs a key with a model allow-list may name: a blob that belongs to a stored model is
 * the model's weights, so naming its digest in `/api/create` `files` (or asking `HEAD
 * /api/blobs/:digest` whether it exists) is using that model. A key may name a blob that belongs
 * to no model, to a model its list admits, or that it uploaded itself in this process (sending
 * the bytes proves it holds them). A key without a list may name any. docs/security.md.
 *
 * @module
 */
import { currentPrincipal } from 'lia/plugin';
import { principalMayUse } from 'lia/utils';
import type { ModelStoreService } from '../store/store.js';

/** `<principal id>|<digest>` of the blobs each key uploaded, the oldest dropped past the bound. */
const uploaded = new Map<string, true>();
const MAX_UPLOADED = 10_000;

function key(digest: string): string | null {
  const id = currentPrincipal()?.id;
  return id === undefined ? null : `${id}|${digest}`;
}

/** Whether the current principal has a model allow-list. */
function restricted(): boolean {
  return Array.isArray(currentPrincipal()?.models);
}

/** Whether the current principal may name blob `digest` (see the module comment). */
export async function mayUseBlob(store: ModelStoreService, digest: string): Promise<boolean> {
  if (!restricted()) return true;
  const k = key(digest);
  if (k !== null && uploaded.has(k)) return true;
  const users = await store.modelsUsing(digest);
  return users.length === 0 || users.some((name) => principalMayUse(name));
}

/** Records that the current principal sent blob `digest`'s bytes. */
export function markUploaded(digest: string): void {
  const k = key(digest);
  if (k === null || !restricted()) return;
  uploaded.delete(k);
  uploaded.set(k, true);
  if (uploaded.size > MAX_UPLOADED) uploaded.delete(uploaded.keys().next().value!);
}
