/**
 * Transparent huge pages for a runner's llama.cpp buffers (Linux, glibc). llama.cpp allocates its
 * KV cache and compute buffers with `posix_memalign`, and a decode walks all of them: with the 4 KiB
 * pages the kernel gives by default, every token pays tens of thousands of TLB misses, which a
 * virtual machine's nested page tables make dear. Where the kernel's THP mode is `madvise` (Debian's
 * and most distributions' default), memory gets 2 MiB pages only when the program asks for them,
 * and llama.cpp never does; glibc can ask on its behalf (`GLIBC_TUNABLES=glibc.malloc.hugetlb=1`,
 * glibc 2.35 and later: `madvise(MADV_HUGEPAGE)` on the large blocks malloc maps). With `hugePages:
 * "auto"` (the default) runners start with that tunable; `"off"` leaves the environment alone.
 *
 * Measured with llama.cpp's own server on the engine benchmark's model (4 slots × 2048, one
 * thread, 8 generations per run, 3 runs each, alternating): 197-207 tok/s without, 206-213 with
 * (+2-4 %), 270-280 MB of the process then on huge pages; the weights, memory-mapped from the
 * model file, stay on small pages either way (reading them into memory instead gained nothing
 * more). The cost: memory is handed out 2 MiB at a time, so a buffer rounds up by at most that.
 * A GLIBC_TUNABLES the operator already set is kept, and its own `glibc.malloc.hugetlb` wins.
 *
 * @module
 */

/** `auto`: ask glibc for transparent huge pages in runners; `off`: leave the environment alone. */
export type HugePagesMode = 'auto' | 'off';

const TUNABLE = 'glibc.malloc.hugetlb';

/**
 * The `GLIBC_TUNABLES` value a runner starts with, given the parent's (`current`), or `undefined` to
 * leave it as it is.
 */
export function runnerTunables(mode: HugePagesMode, current: string | undefined): string | undefined {
  if (mode === 'off') return current;
  const items = (current ?? '').split(':').filter(Boolean);
  if (items.some((item) => item.startsWith(`${TUNABLE}=`))) return current;
  return [...items, `${TUNABLE}=1`].join(':');
}
