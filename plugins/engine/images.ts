/**
 * A request's images before a model is loaded for them, and the check that the loaded model takes
 * them (the engine's `maxImageBytes` and `remoteImages`).
 *
 * @module
 */
import { Errors } from 'lia/plugin';
import type { ResolvedModel } from 'lia/model-store';
import { isRemoteImage } from 'lia/utils';
import { checkImage, fetchImage, IMAGE_BOUNDS } from './image-check.js';
import type { Admitted } from './admission.js';
import type { Lease } from './scheduler.js';

/** The largest image a request may carry by default: 5 MiB (decoded), Anthropic's limit per image. */
export const DEFAULT_MAX_IMAGE_BYTES = 5 * 1024 * 1024;

/**
 * A request's images before a model is loaded for them: the model able to see (the `vision`
 * capability, which a projector layer gives), a remote URL fetched where the operator allows it
 * (`remoteImages`; else a 400, as fetching what a client names reaches the appliance's network),
 * and each image well-formed and within the size limit (`checkImage`). Returns them as base64.
 */
export async function checkImages(
  model: ResolvedModel,
  asked: string,
  images: readonly string[],
  o: { maxBytes: number; remote: boolean },
  param: string,
): Promise<string[]> {
  if (images.length === 0) return [];
  if (!model.capabilities.includes('vision')) throw unsupported(asked, 'vision');
  const out: string[] = [];
  let pixels = 0;
  for (const image of images) {
    if (typeof image !== 'string') throw Errors.badRequest('an image must be base64 text', { param });
    let data = image;
    if (isRemoteImage(image)) {
      if (!o.remote) throw Errors.badRequest('remote image URLs are not fetched; send the image inline as base64 (a data: URL)', { param });
      data = await fetchImage(image, o.maxBytes, param);
    }
    const { width, height } = checkImage(data, o.maxBytes, param);
    pixels += width * height;
    if (pixels > IMAGE_BOUNDS.requestPixels)
      throw Errors.badRequest(`the request's images are over ${IMAGE_BOUNDS.requestPixels / 1e6} megapixels in all`, { param });
    out.push(data);
  }
  return out;
}

/**
 * The loaded model takes the request's media: the backend that runs it serves `vision` (images)
 * or `audio` (a model with a projector on a backend without it, when no enabled backend takes
 * such media, is a 400 saying what to enable). Releases the slot and the admission when it does
 * not.
 */
export function mediaServed(lease: Lease, asked: string, asker: Admitted, capability: 'vision' | 'audio'): void {
  if (lease.model.capabilities.includes(capability)) return;
  lease.release();
  const [has, takes] = capability === 'vision' ? ['a vision projector', 'images'] : ['an audio encoder', 'audio'];
  asker.fail(
    Errors.badRequest(`"${asked}" has ${has}, but the backend that runs it takes no ${takes}; enable backend-llama-server (docs/backends.md)`, {
      param: 'model',
    }),
  );
}

/** A 400 naming the capability a model lacks (as `/api/show` lists them). */
export function unsupported(model: string, capability: string): Error {
  return Errors.badRequest(`"${model}" does not support ${capability} (the "${capability}" capability in /api/show)`, { param: 'model' });
}
